#!/usr/bin/python3
"""Checks the hand-written expectations of tests/test_jinja.c against python3-jinja2.

Every EXPECT(template, vars, want) there must render to `want` with Jinja2
configured as transformers configures it (the environment of reference.py),
and every EXPECT_ERR(...) whose status is not FRT_ERR_UNSUPPORTED or
FRT_ERR_OUT_OF_RANGE (frt's own limits) must fail in Jinja2 too. So the unit
tests cannot drift from the reference. Usage: check_unit_expectations.py
TEST_JINJA_C REFERENCE_PY. Prints 'N passed, N failed'; exits 1 on a mismatch."""
import json
import re
import sys

test_c, reference_py = sys.argv[1], sys.argv[2]
src = open(reference_py, encoding="utf-8").read().replace("\nmain()\n", "\n")
ns = {"__name__": "reference"}
exec(compile(src, reference_py, "exec"), ns)
env = ns["env"]
text = open(test_c, encoding="utf-8").read()


def c_strings(s, i):
    """Adjacent C string literals at s[i:] (or NULL, or the name of a `const
    char *NAME = "...";` of the file): (bytes or None, index after)."""
    out, got = b"", False
    while s[i] in " \n\t":
        i += 1
    m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", s[i:])
    if m and m.group(0) != "NULL":
        d = re.search(r"const char \*" + m.group(0) + r"\s*=", s)
        if not d:
            raise ValueError(f"no definition of {m.group(0)}")
        value, _ = c_strings(s, d.end())
        return value, i + len(m.group(0))
    while True:
        while s[i] in " \n\t":
            i += 1
        if s.startswith("NULL", i):
            return None, i + 4
        if s[i] != '"':
            break
        got, i = True, i + 1
        while s[i] != '"':
            c = s[i]
            if c == "\\":
                e = s[i + 1]
                if e == "x":
                    j, h = i + 2, ""
                    while s[j] in "0123456789abcdefABCDEF":
                        h, j = h + s[j], j + 1
                    out, i = out + bytes([int(h, 16)]), j
                    continue
                if e in "01234567":
                    j, o = i + 1, ""
                    while len(o) < 3 and s[j] in "01234567":
                        o, j = o + s[j], j + 1
                    out, i = out + bytes([int(o, 8)]), j
                    continue
                out += {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", '"': b'"', "'": b"'"}[e]
                i += 2
                continue
            out += c.encode()
            i += 1
        i += 1
    return (out if got else None), i


passed = failed = 0
for m in re.finditer(r"\bEXPECT\(", text):
    i = m.end()
    if text.startswith("tmpl", i):  # the macro's definition
        continue
    t, i = c_strings(text, i)
    v, i = c_strings(text, i + 1)
    w, i = c_strings(text, i + 1)
    try:
        got = env.from_string(t.decode()).render(**(json.loads(v) if v else {}))
    except Exception as e:
        got = f"(error {type(e).__name__}: {e})"
    if got.encode() == w:
        passed += 1
    else:
        failed += 1
        print(f"MISMATCH {t.decode()!r}\n  jinja2: {got!r}\n  test:   {w.decode()!r}")
for m in re.finditer(r"\bEXPECT_ERR\(", text):
    i = m.end()
    if text.startswith("tmpl", i):  # the macro's definition
        continue
    try:
        t, i = c_strings(text, i)
    except ValueError:  # a template built in C (deep nesting, long chains)
        continue
    v, i = c_strings(text, i + 1)
    status = text[i + 1:text.index(",", i + 1)].strip()
    if "UNSUPPORTED" in status or "OUT_OF_RANGE" in status:
        continue
    try:
        got = env.from_string(t.decode()).render(**(json.loads(v) if v else {}))
        failed += 1
        print(f"JINJA2 RENDERED what the test expects to fail: {t.decode()!r} -> {got!r}")
    except Exception:
        passed += 1
print(f"unit expectations vs python3-jinja2: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
