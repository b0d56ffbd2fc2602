#!/usr/bin/python3
"""check_jsonschema.py CASES.json DUMP.jsonl - frt's JSON Schema validator
(frt_json_schema_validate) against python3-jsonschema (Draft 2020-12).

CASES.json: tests/data/grammar/validate_cases.json ({schema, valid[],
invalid[]}: the verdicts test_grammar checks frt against). DUMP.jsonl: the
lines `test_grammar --dump` writes ({schema, instance, valid}: random
automaton outputs, all valid for frt, and one-byte mutations of them with
frt's verdict). Every verdict must be python-jsonschema's too. Prints a
count; exits 1 on the first disagreement."""
import importlib.metadata
import json
import sys

import jsonschema


def verdict(schema, instance):
    return jsonschema.Draft202012Validator(schema).is_valid(instance)


def main():
    cases, dump = sys.argv[1], sys.argv[2]
    n = bad = 0
    for c in json.load(open(cases)):
        for want, key in ((True, "valid"), (False, "invalid")):
            for inst in c[key]:
                n += 1
                if verdict(c["schema"], inst) != want:
                    bad += 1
                    print("DIFF case", json.dumps(c["schema"]), json.dumps(inst), "frt:", want)
    lines = mutated_invalid = 0
    for line in open(dump):
        d = json.loads(line)
        lines += 1
        mutated_invalid += not d["valid"]
        if verdict(d["schema"], d["instance"]) != d["valid"]:
            bad += 1
            print("DIFF dump", json.dumps(d["schema"]), json.dumps(d["instance"]), "frt:", d["valid"])
    print(f"python-jsonschema {importlib.metadata.version('jsonschema')}: {n} case instances and {lines} dumped instances "
          f"({mutated_invalid} invalid ones) agree with frt" if not bad else f"{bad} disagreements")
    sys.exit(1 if bad else 0)


main()
