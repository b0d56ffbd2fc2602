#!/usr/bin/env python3
"""Pack the demo model's training and held-out corpus from Debian 12 packages.

What it makes: one tar.gz holding
    train/<package>/...     Python sources (*.py) of permissively licensed
                            Debian packages, and the reStructuredText sources
                            of the Python 3.11 documentation (python3.11-doc,
                            usr/share/doc/python3.11/html/_sources/*.rst.txt)
    heldout/<package>/...   Python sources of other packages, never trained on
                            (the held-out set of scripts/ref/eval_demo_model.py)
    MANIFEST.tsv            package, version, role, files, bytes, license words
                            found in the package's copyright file

Why from .deb files: nothing depends on what the packing machine happens to
have installed; `apt-get download` fetches the exact packages of the Debian 12
archive (no root needed, nothing installed) and `dpkg-deb -x` unpacks them.
GPL and LGPL packages are not used (the model's weights are shipped).

Usage (a Debian 12 machine with network), from the repository root:
    /usr/bin/python3 scripts/ref/pack_demo_corpus.py --out /tmp/demo-corpus.tar.gz
Exit status 0 ok; 1 when a download, an unpack or a check failed.
"""

import argparse
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# (Debian package, role, upstream license of the files used, as the package's
# /usr/share/doc/<package>/copyright states it; read by hand, stanzas for
# debian/* packaging and for files not used here set aside).
PACKAGES = [
    ("libpython3.11-minimal", "train", "PSF-2.0"),
    ("libpython3.11-stdlib", "train", "PSF-2.0"),
    ("python3.11-doc", "train", "PSF-2.0"),
    ("python3-django", "train", "BSD-3-Clause"),
    ("python3-sympy", "train", "BSD-3-Clause"),
    ("python3-pip", "train", "MIT"),
    ("python3-pygments", "train", "BSD-2-Clause"),
    ("python3-setuptools", "train", "MIT"),
    ("python3-pkg-resources", "train", "MIT"),
    ("python3-cryptography", "train", "Apache-2.0 OR BSD-3-Clause"),
    ("python3-oauthlib", "train", "BSD-3-Clause"),
    ("python3-pyparsing", "train", "MIT"),
    ("python3-yaml", "train", "MIT"),
    ("python3-httplib2", "train", "MIT"),
    ("python3-wheel", "train", "MIT"),
    ("python3-six", "train", "MIT"),
    ("python3-jwt", "train", "MIT"),
    ("python3-jinja2", "heldout", "BSD-3-Clause"),
    ("python3-markupsafe", "heldout", "BSD-3-Clause"),
    ("python3-pyflakes", "heldout", "MIT"),
    ("python3-toml", "heldout", "MIT"),
    ("python3-xmltodict", "heldout", "MIT"),
    ("python3-distro", "heldout", "Apache-2.0"),
    ("python3-blinker", "heldout", "MIT"),
]
DOC_SOURCES = "usr/share/doc/python3.11/html/_sources/"
# Files left out of packages that are otherwise used: pip vendors chardet
# (LGPL-2.1+) and certifi (MPL-2.0).
EXCLUDE = ("pip/_vendor/chardet/", "pip/_vendor/certifi/")


def run(cmd, cwd=None):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    return r.stdout


def package_files(root, name):
    """(relative path in the archive, bytes) of the files this package adds to the corpus."""
    out = []
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.is_symlink():
            continue
        rel = p.relative_to(root).as_posix()
        if name == "python3.11-doc":
            if rel.startswith(DOC_SOURCES) and rel.endswith(".rst.txt"):
                out.append((rel[len(DOC_SOURCES):], p.read_bytes()))
        elif rel.endswith(".py") and "/__pycache__/" not in rel and not any(x in rel for x in EXCLUDE):
            out.append((rel, p.read_bytes()))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output .tar.gz")
    args = ap.parse_args(argv)
    manifest = ["package\tversion\trole\tfiles\tbytes\tlicense"]
    totals = {"train": 0, "heldout": 0}
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(args.out, "w:gz") as tar:
        tmp = Path(tmp)
        names = [n for n, _, _ in PACKAGES]
        print(f"downloading {len(names)} packages ...", flush=True)
        run(["apt-get", "download", *names], cwd=tmp)
        debs = {p.name.split("_")[0]: p for p in tmp.glob("*.deb")}
        for name, role, lic in PACKAGES:
            if name not in debs:
                raise RuntimeError(f"{name}: not downloaded")
            version = run(["dpkg-deb", "-f", str(debs[name]), "Version"]).strip()
            root = tmp / ("x-" + name)
            run(["dpkg-deb", "-x", str(debs[name]), str(root)])
            files = package_files(root, name)
            if not files:
                raise RuntimeError(f"{name}: no corpus files found")
            size = 0
            for rel, data in files:
                info = tarfile.TarInfo(f"{role}/{name}/{rel}")
                info.size = len(data)
                info.mtime = 0
                tar.addfile(info, io.BytesIO(data))
                size += len(data)
            totals[role] += size
            manifest.append(f"{name}\t{version}\t{role}\t{len(files)}\t{size}\t{lic}")
            print(f"  {role:8s} {name:24s} {version:28s} {len(files):6d} files {size:>10,d} bytes  {lic}",
                  flush=True)
        data = ("\n".join(manifest) + "\n").encode()
        info = tarfile.TarInfo("MANIFEST.tsv")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    print(f"train {totals['train']:,} bytes, held-out {totals['heldout']:,} bytes -> {args.out} "
          f"({os.path.getsize(args.out):,} bytes)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print(f"pack_demo_corpus: {e}", file=sys.stderr)
        sys.exit(1)
