#!/usr/bin/python3
"""Goldens for the policy inputs (tests/test_policy_io.c), made at test time.

Writes into OUTDIR (argv[1]), from a fixed seed:
  corpus.txt, strings.txt   text to train a tiny SentencePiece model on and
                            strings to encode (unicode, empty, very long)
  img_*.png / img_*.jpg     random camera images of odd sizes and modes,
                            written by Pillow
  img_*.dec                 Pillow's Image.open(f).convert("RGB") bytes
  img_*.rsz                 openpi's resize_with_pad of that to 224x224
                            (openpi_client/image_tools.py, PIL bilinear)
  arr_*.u8 / arr_*.rsz      raw [h, w, 3] arrays resized to other targets
  manifest.json             the cases, the prompt and normalisation goldens

Run with /usr/bin/python3 (Debian's python3-pil and python3-numpy).
The reference formulas are openpi's (models/tokenizer.py, transforms.py),
re-stated here; nothing is imported from openpi.
"""
import json
import os
import sys

import numpy as np
from PIL import Image

RNG = np.random.default_rng(20)


def resize_with_pad(img, height, width):
    """openpi_client.image_tools._resize_with_pad_pil, re-stated."""
    cur_width, cur_height = img.size
    if cur_width == width and cur_height == height:
        return img
    ratio = max(cur_width / width, cur_height / height)
    resized_height = int(cur_height / ratio)
    resized_width = int(cur_width / ratio)
    resized = img.resize((resized_width, resized_height), resample=Image.BILINEAR)
    out = Image.new(resized.mode, (width, height), 0)
    out.paste(resized, (max(0, int((width - resized_width) / 2)), max(0, int((height - resized_height) / 2))))
    return out


def random_rgb(h, w):
    """Smooth gradients plus noise: resampling and JPEG both have work to do."""
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255.0 / max(w - 1, 1), y * 255.0 / max(h - 1, 1), (x + y) * 127.0 / max(h + w - 2, 1)], -1)
    noise = RNG.integers(-60, 61, size=(h, w, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


IMAGE_CASES = [
    # name, width, height, mode, format, save options
    ("rgb_wide", 317, 151, "RGB", "PNG", {}),
    ("rgb_tall", 97, 403, "RGB", "PNG", {}),
    ("rgb_small", 37, 23, "RGB", "PNG", {}),           # upscaled
    ("rgb_square", 501, 501, "RGB", "PNG", {}),
    ("rgb_224", 224, 224, "RGB", "PNG", {}),           # unchanged
    ("rgb_one_axis", 224, 180, "RGB", "PNG", {}),      # only the vertical pass... and padding
    ("rgb_thin", 640, 3, "RGB", "PNG", {}),
    ("gray", 211, 133, "L", "PNG", {}),
    ("gray_alpha", 150, 260, "LA", "PNG", {}),
    ("rgba", 333, 129, "RGBA", "PNG", {}),
    ("palette", 190, 77, "P", "PNG", {}),
    ("palette_trns", 83, 141, "P", "PNG", {"transparency": 3}),  # a tRNS chunk: transparency is dropped
    ("gray_trns", 77, 66, "L", "PNG", {"transparency": 128}),
    ("rgb_trns", 65, 90, "RGB", "PNG", {"transparency": (10, 20, 30)}),
    ("bilevel", 129, 300, "1", "PNG", {}),
    ("jpeg_rgb", 319, 241, "RGB", "JPEG", {"quality": 90}),
    ("jpeg_444", 161, 97, "RGB", "JPEG", {"quality": 95, "subsampling": 0}),
    ("jpeg_progressive", 280, 199, "RGB", "JPEG", {"quality": 85, "progressive": True}),
    ("jpeg_gray", 123, 457, "L", "JPEG", {"quality": 90}),
    ("jpeg_small", 31, 17, "RGB", "JPEG", {"quality": 90}),
]

REFUSED_CASES = [
    # name, width, height, mode, format, the status frt must return
    ("png16", 64, 48, "I;16", "PNG", "FRT_ERR_UNSUPPORTED"),
    ("jpeg_cmyk", 64, 48, "CMYK", "JPEG", "FRT_ERR_UNSUPPORTED"),
]

ARRAY_CASES = [  # raw arrays resized to other targets: (h, w, out_h, out_w)
    (100, 150, 61, 77),
    (45, 45, 200, 123),
    (300, 20, 224, 224),
    (9, 400, 96, 96),
]


def make_image(mode, w, h):
    rgb = Image.fromarray(random_rgb(h, w), "RGB")
    if mode == "RGBA":
        a = Image.fromarray(RNG.integers(0, 256, size=(h, w), dtype=np.uint8), "L")
        rgb.putalpha(a)
        return rgb
    if mode == "LA":
        img = rgb.convert("L")
        img.putalpha(Image.fromarray(RNG.integers(0, 256, size=(h, w), dtype=np.uint8), "L"))
        return img
    if mode == "P":
        return rgb.convert("P", palette=Image.ADAPTIVE, colors=61)
    if mode == "I;16":
        return Image.fromarray(RNG.integers(0, 65536, size=(h, w), dtype=np.uint16))
    return rgb.convert(mode)


def write_images(out):
    cases = []
    for name, w, h, mode, fmt, opts in IMAGE_CASES:
        ext = "png" if fmt == "PNG" else "jpg"
        path = os.path.join(out, f"img_{name}.{ext}")
        make_image(mode, w, h).save(path, fmt, **opts)
        dec = Image.open(path).convert("RGB")
        rsz = resize_with_pad(dec, 224, 224)
        open(os.path.join(out, f"img_{name}.dec"), "wb").write(dec.tobytes())
        open(os.path.join(out, f"img_{name}.rsz"), "wb").write(rsz.tobytes())
        cases.append({"name": name, "file": os.path.basename(path), "width": w, "height": h})
    refused = []
    for name, w, h, mode, fmt, status in REFUSED_CASES:
        ext = "png" if fmt == "PNG" else "jpg"
        path = os.path.join(out, f"img_{name}.{ext}")
        make_image(mode, w, h).save(path, fmt)
        refused.append({"name": name, "file": os.path.basename(path), "status": status})
    arrays = []
    for i, (h, w, oh, ow) in enumerate(ARRAY_CASES):
        a = random_rgb(h, w)
        open(os.path.join(out, f"arr_{i}.u8"), "wb").write(a.tobytes())
        r = resize_with_pad(Image.fromarray(a, "RGB"), oh, ow)
        open(os.path.join(out, f"arr_{i}.rsz"), "wb").write(r.tobytes())
        arrays.append({"file": f"arr_{i}", "height": h, "width": w, "out_height": oh, "out_width": ow})
    return cases, refused, arrays


WORDS = ["pick", "up", "the", "red", "block", "place", "it", "in", "bowl", "open", "drawer", "robot", "arm",
         "gripper", "grasp", "cup", "señal", "naïve", "café", "Straße", "日本語", "ロボット", "把杯子放下",
         "красный", "куб", "😀", "🤖", "x²", "tab\there", "123", "4567", "Task:", "State:", "Action:", ";", ","]


def random_sentence(n):
    return " ".join(WORDS[i] for i in RNG.integers(0, len(WORDS), size=n))


def write_text(out):
    with open(os.path.join(out, "corpus.txt"), "w", encoding="utf-8") as f:
        for _ in range(3000):
            f.write(random_sentence(int(RNG.integers(3, 15))) + "\n")
    strings = ["", " ", "a", "pick up the red block", "  leading and trailing  ", "UPPER lower MiXeD",
               "日本語のロボット", "emoji 😀🤖 and more", "digits 0123456789 and 3.14159", "unseen ЖЩЫ ǅ ᚠᛇᚻ",
               "Task: pick, State: 0 12 255 -1;", "Action: ", "x" * 20000, random_sentence(3000)]
    strings += [random_sentence(int(RNG.integers(1, 30))) for _ in range(60)]
    with open(os.path.join(out, "strings.txt"), "w", encoding="utf-8") as f:
        for s in strings:
            f.write(s + "\n")
    return len(strings)


def clean(prompt):
    return prompt.strip().replace("_", " ").replace("\n", " ")


def pi05_text(prompt, state):
    """openpi models/tokenizer.py PaligemmaTokenizer.tokenize, the Pi0.5 branch."""
    bins = np.digitize(state, bins=np.linspace(-1, 1, 256 + 1)[:-1]) - 1
    return f"Task: {clean(prompt)}, State: {' '.join(map(str, bins))};\nAction: "


def prompt_goldens():
    prompts = ["pick up the red block", "  put_the_cup\nin the sink \u3000", "日本語_テスト", "a"]
    out = []
    for p in prompts:
        n = int(RNG.integers(1, 33))
        state = RNG.uniform(-1.3, 1.3, size=n).astype(np.float32)
        state[0] = -1.0                      # edges: exactly -1, 1, and just below 1
        if n > 2:
            state[1] = 1.0
            state[2] = np.float32(1.0 - 1.0 / 128)
        out.append({"prompt": p, "state": [float(x) for x in state], "cleaned": clean(p),
                    "pi05_text": pi05_text(p, state.astype(np.float64))})
    return out


def norm_goldens():
    """transforms.Normalize / Unnormalize (z-score and quantile), in float64."""
    sd, ad, chunk, model_ad = 7, 6, 5, 9
    st = {"mean": RNG.normal(0, 2, sd), "std": RNG.uniform(0.1, 3, sd)}
    st["q01"] = st["mean"] - RNG.uniform(0.5, 2, sd)
    st["q99"] = st["mean"] + RNG.uniform(0.5, 2, sd)
    ac = {"mean": RNG.normal(0, 1, ad), "std": RNG.uniform(0.1, 2, ad)}
    ac["q01"] = ac["mean"] - RNG.uniform(0.5, 2, ad)
    ac["q99"] = ac["mean"] + RNG.uniform(0.5, 2, ad)
    state = RNG.normal(0, 2, 5).astype(np.float32)          # shorter than the stats: they are sliced
    actions = RNG.normal(0, 1, (chunk, model_ad)).astype(np.float32)
    s = state.astype(np.float64)
    z = (s - st["mean"][:5]) / (st["std"][:5] + 1e-6)
    q = (s - st["q01"][:5]) / (st["q99"][:5] - st["q01"][:5] + 1e-6) * 2.0 - 1.0
    a = actions.astype(np.float64)
    mean = np.pad(ac["mean"], (0, model_ad - ad), constant_values=0.0)
    std = np.pad(ac["std"], (0, model_ad - ad), constant_values=1.0)
    az = a * (std + 1e-6) + mean
    aq = np.concatenate([(a[:, :ad] + 1.0) / 2.0 * (ac["q99"] - ac["q01"] + 1e-6) + ac["q01"], a[:, ad:]], -1)
    stats = {"norm_stats": {"state": {k: v.tolist() for k, v in st.items()},
                            "actions": {k: v.tolist() for k, v in ac.items()}}}
    return {"stats": stats, "state": state.tolist(), "actions": actions.reshape(-1).tolist(), "chunk": chunk,
            "model_action_dim": model_ad, "out_dim": 4, "state_z": z.tolist(), "state_q": q.tolist(),
            "actions_z": az[:, :4].reshape(-1).tolist(), "actions_q": aq[:, :4].reshape(-1).tolist()}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    images, refused, arrays = write_images(out)
    n_strings = write_text(out)
    manifest = {"images": images, "refused": refused, "arrays": arrays, "n_strings": n_strings,
                "prompts": prompt_goldens(), "norm": norm_goldens()}
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
