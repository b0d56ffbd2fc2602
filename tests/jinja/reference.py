#!/usr/bin/python3
"""Reference renderings of real chat templates for tests/sh/jinja_reference.sh.

Renders every template given on the command line over a fixed set of
conversations with Jinja2 configured as transformers configures it
(transformers/utils/chat_template_utils.py, _compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols, the {% generation %} tag]), its own tojson filter
(json.dumps with ensure_ascii=False), raise_exception and strftime_now; the
render gets messages, tools (None when absent), documents=None,
add_generation_prompt, the special tokens of tokenizer_config.json and extra
kwargs (enable_thinking), as apply_chat_template passes them.

Usage: reference.py OUT.json NAME=PATH ...   (PATH: tokenizer_config.json, a
chat_golden.json-style {"templates": {...}} file, or a .jinja file)
Writes {"jinja2": version, "cases": [{name, template, vars, text | error, raised}]}.
Run with /usr/bin/python3 (Debian's python3-jinja2)."""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(Extension):
    # transformers' AssistantTracker: {% generation %}...{% endgeneration %} renders its body
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_gen"), [], [], body).set_lineno(lineno)

    def _gen(self, caller):
        return caller()


class RaisedByTemplate(Exception):
    pass


def raise_exception(message):
    raise RaisedByTemplate(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search_files",
        "description": "Search the repository for a regular expression.",
        "parameters": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "max_results": {"type": "integer", "minimum": 1, "default": 20},
                "paths": {"type": "array", "items": {"type": "string"}},
                "case_sensitive": {"type": "boolean"},
                "score": {"type": "number"},
                "nothing": {"type": "null"},
            },
            "required": ["pattern"],
        },
    },
}

SYS = {"role": "system", "content": "You are a careful coding assistant."}
CALL_OBJ = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}
CALL_STR = {"id": "call_2", "type": "function",
            "function": {"name": "search_files", "arguments": "{\"pattern\": \"TODO\", \"max_results\": 5}"}}

CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello!"}],
    "system_user": [SYS, {"role": "user", "content": "Write a function that sums squares."}],
    "multi_turn": [SYS, {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
                   {"role": "user", "content": "And 3+3?"}],
    "no_system_multi": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
                        {"role": "user", "content": "  padded  \n"}],
    "thinking_history": [{"role": "user", "content": "Is 7 prime?"},
                         {"role": "assistant", "content": "<think>\nCheck divisors 2..2.\n</think>\n\nYes, 7 is prime."},
                         {"role": "user", "content": "And 9?"}],
    "thinking_last": [{"role": "user", "content": "Is 9 prime?"},
                      {"role": "assistant", "content": "<think>3*3</think>No."}],
    "reasoning_field": [{"role": "user", "content": "2*3?"},
                        {"role": "assistant", "content": "6", "reasoning_content": "two times three"},
                        {"role": "user", "content": "thanks"}],
    "tool_call": [SYS, {"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": "", "tool_calls": [CALL_OBJ]}],
    "tool_result": [{"role": "user", "content": "Weather in Paris?"},
                    {"role": "assistant", "content": "Let me check.", "tool_calls": [CALL_OBJ]},
                    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
                     "content": "{\"temperature\": 21, \"sky\": \"clear\"}"}],
    "two_calls_two_results": [{"role": "user", "content": "Weather and TODOs?"},
                              {"role": "assistant", "content": None, "tool_calls": [CALL_OBJ, CALL_STR]},
                              {"role": "tool", "tool_call_id": "call_1", "content": "21C"},
                              {"role": "tool", "tool_call_id": "call_2", "content": "src/a.c:3: TODO"},
                              {"role": "assistant", "content": "It is 21C; one TODO in src/a.c."},
                              {"role": "user", "content": "Thanks"}],
    "developer": [{"role": "developer", "content": "Answer tersely."}, {"role": "user", "content": "Why?"}],
    "unicode": [{"role": "system", "content": "Réponds en français — s'il te plaît."},
                {"role": "user", "content": "日本語 😀 \"quotes\" \\ back\tslash <|im_end|> {{ not jinja }}"}],
    "alternating": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                    {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}],
    "two_users": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
    "system_late": [{"role": "user", "content": "a"}, {"role": "system", "content": "late system"}],
    "multimodal": [{"role": "user", "content": [{"type": "text", "text": "Describe "},
                                                {"type": "image"}, {"type": "text", "text": " please"}]}],
    "system_parts": [{"role": "system", "content": [{"type": "text", "text": "Parts system."}]},
                     {"role": "user", "content": "hi"}],
    "empty_contents": [{"role": "system", "content": ""}, {"role": "user", "content": "   "},
                       {"role": "assistant", "content": ""}, {"role": "user", "content": "\n"}],
    "string_args_unicode": [{"role": "user", "content": "Find ünïcode"},
                            {"role": "assistant", "content": "<think>\nplan\n</think>\n\nSearching.",
                             "tool_calls": [{"type": "function", "function": {
                                 "name": "search_files",
                                 "arguments": "{\"pattern\": \"caf\u00e9 \\\\d+\", \"paths\": [\"src/\u65e5\"]}"}}]},
                            {"role": "tool", "content": "none found"}],
    "reasoning_last": [{"role": "user", "content": "q"},
                       {"role": "assistant", "content": "answer", "reasoning_content": "\nthought\n"}],
}

# (conversation, tools, add_generation_prompt, enable_thinking or None)
PLAN = []
for conv in CONVERSATIONS:
    for gen in (True, False):
        PLAN.append((conv, None, gen, None))
for conv in ("user", "system_user", "multi_turn", "thinking_history", "thinking_last", "reasoning_field", "unicode",
             "reasoning_last", "string_args_unicode"):
    for th in (True, False):
        PLAN.append((conv, None, True, th))
for conv in ("user", "system_user", "tool_call", "tool_result", "two_calls_two_results", "string_args_unicode"):
    for gen in (True, False):
        PLAN.append((conv, [WEATHER, SEARCH], gen, None))
    PLAN.append((conv, [WEATHER], True, False))


def load_templates(spec):
    name, path = spec.split("=", 1)
    if path.endswith(".jinja"):
        with open(path, encoding="utf-8") as f:
            return [(name, f.read(), {})]
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    if "templates" in cfg:
        return [(f"{name}/{k}", v, {}) for k, v in cfg["templates"].items()]
    tmpl = cfg.get("chat_template")
    if isinstance(tmpl, list):
        tmpl = next(t["template"] for t in tmpl if t.get("name") == "default")
    specials = {}
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        v = cfg.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            specials[key] = v
    return [(name, tmpl, specials)]


def main():
    out_path = sys.argv[1]
    cases = []
    for spec in sys.argv[2:]:
        for name, tmpl, specials in load_templates(spec):
            compiled = env.from_string(tmpl)
            for conv, tools, gen, th in PLAN:
                vars_ = dict(specials)
                vars_.update({"messages": CONVERSATIONS[conv], "tools": tools, "documents": None,
                              "add_generation_prompt": gen})
                if th is not None:
                    vars_["enable_thinking"] = th
                case = {"name": f"{name} {conv} tools={'yes' if tools else 'no'} gen={gen} thinking={th}",
                        "template": tmpl, "vars": vars_}
                try:
                    case["text"] = compiled.render(**vars_)
                except RaisedByTemplate as e:
                    case["error"] = str(e)
                    case["raised"] = True
                except Exception as e:  # the template failed on its own (undefined, type error)
                    case["error"] = f"{type(e).__name__}: {e}"
                    case["raised"] = False
                cases.append(case)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"jinja2": jinja2.__version__, "cases": cases}, f, ensure_ascii=False, indent=1)


main()
