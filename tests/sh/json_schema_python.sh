#!/usr/bin/env bash
# json_schema_python.sh BUILD_DIR SOURCE_DIR - frt's JSON Schema validator
# (frt/grammar.h frt_json_schema_validate) against Debian's
# python3-jsonschema (Draft 2020-12): the hand-written cases of
# tests/data/grammar/validate_cases.json, and the random outputs of the
# schema automaton (test_grammar --dump: tests/data/grammar/schemas.json x
# 40 seeds, every one valid for frt) with one-byte mutations of them that
# are still JSON (valid or not, frt's verdict recorded). Every verdict must
# agree (tests/grammar/check_jsonschema.py).
#
# Skips (77) when /usr/bin/python3 has no jsonschema (scripts/install-deps.sh
# installs python3-jsonschema); with CI=true it fails instead.
set -euo pipefail
B=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
if ! /usr/bin/python3 -c 'import jsonschema' 2>/dev/null; then
    if [ -n "${CI:-}" ]; then echo "FAIL (CI): python3-jsonschema is not installed"; exit 1; fi
    echo "SKIP: python3-jsonschema is not installed (scripts/install-deps.sh)"; exit 77
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$B/tests/test_grammar" --dump "$WORK/dump.jsonl" >"$WORK/test.log" || { cat "$WORK/test.log"; echo "FAIL: test_grammar --dump"; exit 1; }
n=$(wc -l <"$WORK/dump.jsonl")
[ "$n" -ge 600 ] || { echo "FAIL: only $n dumped instances"; exit 1; }
/usr/bin/python3 "$SRC/tests/grammar/check_jsonschema.py" "$SRC/tests/data/grammar/validate_cases.json" "$WORK/dump.jsonl"
echo "PASS json_schema_python"
