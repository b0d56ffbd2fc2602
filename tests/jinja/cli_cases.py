#!/usr/bin/python3
"""frt chat-template against python3-jinja2, byte for byte, on real templates.

Usage: cli_cases.py FRT CASES.json NAME=TOKENIZER_CONFIG ...
CASES.json is what reference.py writes; for every case of a template named
on the command line, the case's messages / tools / enable_thinking are
written to files and `FRT chat-template --tokenizer-config TOKENIZER_CONFIG
--messages ... [--tools ...] [--no-generation-prompt] [--kwargs ...]` must
print exactly the reference text (no newline added) and exit 0, or, where
Jinja2 failed, exit 1 (with the template's own message for
raise_exception). Prints one line per template; exits 1 on any difference."""
import json
import os
import subprocess
import sys
import tempfile


def run_case(frt, cfg, case, work):
    v = case["vars"]
    args = [frt, "chat-template", "--tokenizer-config", cfg, "--messages", os.path.join(work, "m.json")]
    with open(args[-1], "w", encoding="utf-8") as f:
        json.dump(v["messages"], f, ensure_ascii=False)
    if v.get("tools") is not None:
        args += ["--tools", os.path.join(work, "t.json")]
        with open(args[-1], "w", encoding="utf-8") as f:
            json.dump(v["tools"], f, ensure_ascii=False)
    if not v["add_generation_prompt"]:
        args.append("--no-generation-prompt")
    if "enable_thinking" in v:
        args += ["--kwargs", json.dumps({"enable_thinking": v["enable_thinking"]})]
    p = subprocess.run(args, capture_output=True, timeout=60)
    if "text" in case:
        if p.returncode != 0:
            return f"exit {p.returncode}: {p.stderr.decode(errors='replace').strip()}"
        if p.stdout != case["text"].encode("utf-8"):
            return f"output differs:\n--- frt\n{p.stdout!r}\n--- jinja2\n{case['text'].encode('utf-8')!r}"
        return None
    if p.returncode != 1:
        return f"exit {p.returncode} where Jinja2 failed with {case['error']!r}"
    if case.get("raised") and case["error"] not in p.stderr.decode(errors="replace"):
        return f"stderr {p.stderr!r} lacks {case['error']!r}"
    return None


def main():
    frt, cases_path = sys.argv[1], sys.argv[2]
    configs = dict(a.split("=", 1) for a in sys.argv[3:])
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    bad = 0
    with tempfile.TemporaryDirectory() as work:
        for name, cfg in configs.items():
            mine = [c for c in cases if c["name"].split(" ", 1)[0] == name]
            same = failed = 0
            for c in mine:
                err = run_case(frt, cfg, c, work)
                if err:
                    bad += 1
                    print(f"FAIL {c['name']}: {err}")
                elif "text" in c:
                    same += 1
                else:
                    failed += 1
            print(f"{name}: {len(mine)} cases, {same} byte-identical, {failed} failures reproduced (exit 1)")
            if not mine:
                bad += 1
    sys.exit(1 if bad else 0)


main()
