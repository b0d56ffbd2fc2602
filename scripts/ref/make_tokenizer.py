#!/usr/bin/env python3
"""Make frt's tokenizer reference data: three byte-level BPE tokenizers trained
with Hugging Face `tokenizers`, and golden ids / decodes / chat prompts.

Runs on the GPU machine (python3 with tokenizers 0.23 and transformers 5; no
network, no GPU needed), from the repository root:

    python3 scripts/ref/make_tokenizer.py --out W/tokenizer

writes

    W/tokenizer/qwen35/tokenizer.json        Qwen3.5 pipeline: NFC, Split(Qwen3.5 regex,
                                             Isolated), ByteLevel(no prefix, no regex),
                                             BPE 4096 (specials <|endoftext|>,
                                             <|im_start|>, <|im_end|> inside the vocab),
                                             ByteLevel decoder and post-processor
    W/tokenizer/qwen35/tokenizer_config.json no chat_template key ...
    W/tokenizer/qwen35/chat_template.jinja   ... the plain ChatML template lives here
                                             (as transformers 5 saves it); the demo
                                             model is trained on plain ChatML
    W/tokenizer/qwen2/tokenizer.json         Qwen2 regex, merges in the legacy "a b"
                                             form, extra added tokens with every flag
                                             (lstrip, rstrip, single_word, normalized)
    W/tokenizer/qwen2/tokenizer_config.json  chat_template = the Qwen2.5 template
    W/tokenizer/gpt2/tokenizer.json          GPT-2 style: ByteLevel(add_prefix_space,
                                             use_regex), no normalizer, 2048 tokens,
                                             ignore_merges, post-processor
                                             Sequence[ByteLevel, TemplateProcessing
                                             "<|endoftext|> $A"] (Llama 3 style BOS)
    W/tokenizer/golden.json                  texts -> ids (with and without special
                                             tokens), ids -> text, chat prompts -> text
                                             and ids (transformers apply_chat_template)
    W/tokenizer/chat_golden.json             chat prompts -> text only

The lead copies W/tokenizer/* to tests/data/tokenizer/ (about 1 MB in all).

    python3 scripts/ref/make_tokenizer.py --chat-only --out DIR

needs only jinja2: it renders the chat cases with the Jinja environment
transformers uses and writes DIR/chat_golden.json (this is how the file in
tests/data/tokenizer/ was first made on the development machine).

Corpus: the first --max-bytes (20 MB) of the Python standard library's *.py
files in sorted path order (sysconfig stdlib path, site-packages left out),
decoded as UTF-8 with replacement: deterministic for a given Python build.
Test texts use only characters assigned in Unicode 14 (Debian 12's PCRE2).
"""
import argparse
import json
import os
import sys
import time

# ---- pre-tokenizer regexes -------------------------------------------------
# transformers src/transformers/models/qwen3_5/tokenization_qwen3_5.py
QWEN35_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"""
                r""" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
# transformers src/transformers/models/qwen2/tokenization_qwen2.py
QWEN2_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
               r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# ---- chat templates ----------------------------------------------------------
CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}")

# Qwen/Qwen2-7B-Instruct tokenizer_config.json
QWEN2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

# Qwen/Qwen2.5-7B-Instruct tokenizer_config.json
QWEN25_TEMPLATE = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""

# Qwen/Qwen3-8B tokenizer_config.json (the thinking template)
QWEN3_TEMPLATE = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}"""

# The Qwen3.5 chat_template.jinja (Qwen3.6 adds a preserve_thinking switch
# to the assistant condition; its output is the same when it is not passed).
QWEN35_TEMPLATE = r"""{%- set image_count = namespace(value=0) %}
{%- set video_count = namespace(value=0) %}
{%- macro render_content(content, do_vision_count, is_system_content=false) %}
    {%- if content is string %}
        {{- content }}
    {%- elif content is iterable and content is not mapping %}
        {%- for item in content %}
            {%- if 'image' in item or 'image_url' in item or item.type == 'image' %}
                {%- if is_system_content %}
                    {{- raise_exception('System message cannot contain images.') }}
                {%- endif %}
                {%- if do_vision_count %}
                    {%- set image_count.value = image_count.value + 1 %}
                {%- endif %}
                {%- if add_vision_id %}
                    {{- 'Picture ' ~ image_count.value ~ ': ' }}
                {%- endif %}
                {{- '<|vision_start|><|image_pad|><|vision_end|>' }}
            {%- elif 'video' in item or item.type == 'video' %}
                {%- if is_system_content %}
                    {{- raise_exception('System message cannot contain videos.') }}
                {%- endif %}
                {%- if do_vision_count %}
                    {%- set video_count.value = video_count.value + 1 %}
                {%- endif %}
                {%- if add_vision_id %}
                    {{- 'Video ' ~ video_count.value ~ ': ' }}
                {%- endif %}
                {{- '<|vision_start|><|video_pad|><|vision_end|>' }}
            {%- elif 'text' in item %}
                {{- item.text }}
            {%- else %}
                {{- raise_exception('Unexpected item type in content.') }}
            {%- endif %}
        {%- endfor %}
    {%- elif content is none or content is undefined %}
        {{- '' }}
    {%- else %}
        {{- raise_exception('Unexpected content type.') }}
    {%- endif %}
{%- endmacro %}
{%- if not messages %}
    {{- raise_exception('No messages provided.') }}
{%- endif %}
{%- if tools and tools is iterable and tools is not mapping %}
    {{- '<|im_start|>system\n' }}
    {{- "# Tools\n\nYou have access to the following functions:\n\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>" }}
    {{- '\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>' }}
    {%- if messages[0].role == 'system' %}
        {%- set content = render_content(messages[0].content, false, true)|trim %}
        {%- if content %}
            {{- '\n\n' + content }}
        {%- endif %}
    {%- endif %}
    {{- '<|im_end|>\n' }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {%- set content = render_content(messages[0].content, false, true)|trim %}
        {{- '<|im_start|>system\n' + content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" %}
        {%- set content = render_content(message.content, false)|trim %}
        {%- if not(content.startswith('<tool_response>') and content.endswith('</tool_response>')) %}
            {%- set ns.multi_step_tool = false %}
            {%- set ns.last_query_index = index %}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if ns.multi_step_tool %}
    {{- raise_exception('No user query found in messages.') }}
{%- endif %}
{%- for message in messages %}
    {%- set content = render_content(message.content, true)|trim %}
    {%- if message.role == "system" %}
        {%- if not loop.first %}
            {{- raise_exception('System message must be at the beginning.') }}
        {%- endif %}
    {%- elif message.role == "user" %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- set reasoning_content = reasoning_content|trim %}
        {%- if loop.index0 > ns.last_query_index %}
            {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content + '\n</think>\n\n' + content }}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls and message.tool_calls is iterable and message.tool_calls is not mapping %}
            {%- for tool_call in message.tool_calls %}
                {%- if tool_call.function is defined %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {%- if loop.first %}
                    {%- if content|trim %}
                        {{- '\n\n<tool_call>\n<function=' + tool_call.name + '>\n' }}
                    {%- else %}
                        {{- '<tool_call>\n<function=' + tool_call.name + '>\n' }}
                    {%- endif %}
                {%- else %}
                    {{- '\n<tool_call>\n<function=' + tool_call.name + '>\n' }}
                {%- endif %}
                {%- if tool_call.arguments is defined %}
                    {%- for args_name, args_value in tool_call.arguments|items %}
                        {{- '<parameter=' + args_name + '>\n' }}
                        {%- set args_value = args_value | string if args_value is string else args_value | tojson | safe %}
                        {{- args_value }}
                        {{- '\n</parameter>\n' }}
                    {%- endfor %}
                {%- endif %}
                {{- '</function>\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.previtem and loop.previtem.role != "tool" %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if not loop.last and loop.nextitem.role != "tool" %}
            {{- '<|im_end|>\n' }}
        {%- elif loop.last %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- else %}
        {{- raise_exception('Unexpected message role.') }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- else %}
        {{- '<think>\n' }}
    {%- endif %}
{%- endif %}
"""

CHAT_TEMPLATES = {
    "chatml": CHATML_TEMPLATE,
    "qwen2": QWEN2_TEMPLATE,
    "qwen2.5": QWEN25_TEMPLATE,
    "qwen3": QWEN3_TEMPLATE,
    "qwen3.5": QWEN35_TEMPLATE,
}

SYS = "You are a careful Python coding assistant."
CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": SYS},
     {"role": "user", "content": "Write a function that returns the sum of the squares of a list of numbers."}],
    [{"role": "system", "content": SYS}, {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "And 3+3?"}],
    [{"role": "user", "content": "Solve x."},
     {"role": "assistant", "content": "<think>\nLet me think.\n</think>\n\nx = 1"}],
    [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "<think>\nr1\n</think>\n\nA1"},
     {"role": "user", "content": "Q2"},
     {"role": "assistant", "content": "<think>\n\nr2\n\n</think>\n\n\nA2"}, {"role": "user", "content": "Q3"}],
    [{"role": "system", "content": "  spaced system  \n"}, {"role": "user", "content": "  padded user \t\n"},
     {"role": "assistant", "content": "  padded answer  "}],
    [{"role": "user", "content": "h\u00e9llo w\u00f6rld \u65e5\u672c\u8a9e \U0001F600 \u00a0"}],
    [{"role": "user", "content": "<tool_response>\nresult\n</tool_response>"}],
    [{"role": "user", "content": "first"}, {"role": "user", "content": "<tool_response>\nr\n</tool_response>"},
     {"role": "assistant", "content": "done"}],
    [{"role": "assistant", "content": "hi"}],
    [{"role": "user", "content": "a"}, {"role": "system", "content": "late system"}],
    [{"role": "system", "content": "sys only"}],
    [{"role": "user", "content": "print('<|im_end|>') and <|endoftext|>\n\n"},
     {"role": "assistant", "content": "def f():\n\treturn 1\n"}],
    [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two </think> three"},
     {"role": "user", "content": "four"}, {"role": "assistant", "content": "<think>only reasoning</think>"}],
]


def chat_options(name):
    opts = [(True, None), (False, None)]
    if name in ("qwen3", "qwen3.5"):
        opts += [(True, False), (True, True), (False, False)]
    return opts


def jinja_env():
    """The Jinja environment of transformers' chat templates
    (utils/chat_template_utils.py: _compile_jinja_template)."""
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def render_jinja(env, template, messages, add_generation_prompt, enable_thinking):
    kwargs = {}
    if enable_thinking is not None:
        kwargs["enable_thinking"] = enable_thinking
    try:
        return env.from_string(template).render(messages=messages, tools=None, documents=None,
                                                add_generation_prompt=add_generation_prompt, **kwargs)
    except Exception as e:  # the template's raise_exception
        return {"error": str(e)}


def chat_cases():
    env = jinja_env()
    cases = []
    for name, template in CHAT_TEMPLATES.items():
        for ci, conv in enumerate(CONVERSATIONS):
            for gen, think in chat_options(name):
                out = render_jinja(env, template, conv, gen, think)
                case = {"template": name, "conversation": ci, "add_generation_prompt": gen,
                        "enable_thinking": think}
                if isinstance(out, dict):
                    case["error"] = out["error"]
                else:
                    case["text"] = out
                cases.append(case)
    return cases


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


def chat_golden_doc(cases):
    import jinja2
    return {"about": "chat prompts rendered by Jinja with transformers' environment "
                     "(scripts/ref/make_tokenizer.py)",
            "jinja2": jinja2.__version__,
            "templates": CHAT_TEMPLATES, "conversations": CONVERSATIONS, "cases": cases}


# ---- tokenizer training -------------------------------------------------------
def stdlib_corpus(max_bytes):
    import sysconfig
    root = sysconfig.get_paths()["stdlib"]
    paths = []
    for dirpath, dirnames, filenames in os.walk(root):
        if "site-packages" in dirpath or "dist-packages" in dirpath:
            continue
        paths += [os.path.join(dirpath, f) for f in filenames if f.endswith(".py")]
    paths.sort()
    texts, total = [], 0
    for p in paths:
        with open(p, "rb") as f:
            data = f.read()
        texts.append(data.decode("utf-8", errors="replace"))
        total += len(data)
        if total >= max_bytes:
            break
    return texts, total, len(texts)


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def train(texts, vocab_size, normalizer, pre_tokenizer):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def rewrite(tok, edit):
    """Edit the serialized JSON (options the Python API does not expose) and
    reload it, so what is tested is exactly what is saved."""
    from tokenizers import Tokenizer
    d = json.loads(tok.to_str())
    edit(d)
    return Tokenizer.from_str(json.dumps(d, ensure_ascii=False))


def save(tok, d, config=None, jinja=None):
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tokenizer.json")
    tok.save(path)
    if config is not None:
        write_json(os.path.join(d, "tokenizer_config.json"), config)
    if jinja is not None:
        with open(os.path.join(d, "chat_template.jinja"), "w", encoding="utf-8") as f:
            f.write(jinja)
    from tokenizers import Tokenizer
    return Tokenizer.from_file(path)  # what frt will read


def tokenizer_config(tok, chat_template=None):
    decoder = {}
    added = json.loads(tok.to_str()).get("added_tokens", [])
    for a in added:
        decoder[str(a["id"])] = {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                   "single_word", "special")}
    cfg = {
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 32768,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }
    if chat_template is not None:
        cfg["chat_template"] = chat_template
    return cfg


def test_texts(long_file_text):
    t = {
        "empty": "",
        "english": "Hello, world! It's a test: we're done, they'll see. I'd say you've got it, haven't you?",
        "contractions": "DON'T it's IT'S we'LL 'S 'ſ 're 've 'm 'd 'x",
        "code": ("import os\n\n\nclass Foo(object):\n    \"\"\"Docstring.\"\"\"\n\n    def bar(self, x=3.14, y=0x1F):\n"
                 "\tif x >= 10 and not y:\n\t\treturn {'k': [1, 2, 3]}  # comment\n        return None\n"),
        "numbers": "1234567890 3.14159 1e-10 -42 \u0663\u0664\u0665 \u00b2\u00b3 \u00bd 10,000,000",
        "cjk": "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u4e2d\u6587\u6587\u672c\uff0c\u8fd8\u6709"
               "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\u3002",
        "emoji": "Emoji: \U0001F600\U0001F44D\U0001F3FD\U0001F1EF\U0001F1F5 "
                 "\U0001F468\u200d\U0001F469\u200d\U0001F467 \u2728\u2764\ufe0f",
        "combining": "e\u0301 a\u0308 n\u0303 \u00f1 \u00e9 \u01c4 \u01c5 \u0939\u093f\u0928\u094d\u0926\u0940 "
                     "Z\u0351\u036b\u0343a\u0310l\u0352g\u033ao \u1100\u1161\u11a8 \u212b \u2126",
        "whitespace": "  leading\t\ttabs\n\n\nnewlines   \r\n  trailing   \n\t \n",
        "unicode_spaces": "a \u00a0 b \u3000 c \u2028 d \u0085 e \u2009f\u202f g \u1680 h",
        "specials": "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
        "specials_inline": "text<|endoftext|>more<|im_end|>end <|im_start|> <|im_end|><|im_end|>",
        "partial_specials": "<|im_start <|im_end| <|endoftext|x <| |>",
        "long_run": "a" * 3000 + " " * 500 + "b" + "\n" * 50 + "=" * 1000,
        "mixed": long_file_text,
    }
    return t


def extra_texts(name):
    if name == "qwen2":
        return {"flags": "xyzzy axyzzy xyzzy_ xyzzy. <mask> a <mask>b [SEP]  x \n e\u0301clair \u00e9clair "
                         "<think>\nhm\n</think>\n\n"}
    if name == "gpt2":
        return {"prefix": "hello<|endoftext|>world <|endoftext|> x"}
    return {}


def byte_id(tok, b):
    return tok.token_to_id(bytes_to_unicode()[b])


def decode_cases(tok):
    ids_e = tok.encode("\u00e9 \U0001F600", add_special_tokens=False).ids
    lists = [
        [byte_id(tok, 0xC3)],
        [byte_id(tok, 0xF0), byte_id(tok, 0x9F), byte_id(tok, 0x98)],
        [byte_id(tok, 0xF0), byte_id(tok, 0x9F), byte_id(tok, 0x98), byte_id(tok, ord("A"))],
        [byte_id(tok, 0xED), byte_id(tok, 0xA0), byte_id(tok, 0x80)],
        [byte_id(tok, 0xFF), byte_id(tok, 0xC0), byte_id(tok, 0x80)],
        [tok.token_to_id("<|im_start|>"), byte_id(tok, ord("x")), tok.token_to_id("<|im_end|>")],
        ids_e,
        list(reversed(ids_e)),
        [],
    ]
    return [{"ids": l, "text": tok.decode(l, skip_special_tokens=False)} for l in lists]


def golden_for(tok, name, texts):
    cases = []
    for tname, text in list(texts.items()) + list(extra_texts(name).items()):
        plain = tok.encode(text, add_special_tokens=False).ids
        case = {"name": tname, "text": text, "ids": plain,
                "decoded": tok.decode(plain, skip_special_tokens=False)}
        special = tok.encode(text).ids  # add_special_tokens=True, the Python default
        if special != plain:
            case["ids_special"] = special
        cases.append(case)
    return {"dir": name, "vocab_size": tok.get_vocab_size(with_added_tokens=True),
            "cases": cases, "decode": decode_cases(tok)}


def load_transformers(d):
    import transformers
    try:
        t = transformers.AutoTokenizer.from_pretrained(d)
        how = "AutoTokenizer"
    except Exception as e:  # noqa: BLE001 - record and fall back
        print(f"AutoTokenizer failed on {d}: {e!r}; using PreTrainedTokenizerFast", flush=True)
        t = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(d, "tokenizer.json"))
        how = "PreTrainedTokenizerFast"
    return t, how


def as_ids(x):
    if hasattr(x, "keys") and "input_ids" in x:
        x = x["input_ids"]
    if hasattr(x, "tolist"):
        x = x.tolist()
    if x and isinstance(x[0], list):
        x = x[0]
    return [int(i) for i in x]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-bytes", type=int, default=20_000_000)
    ap.add_argument("--chat-only", action="store_true", help="only chat_golden.json (needs jinja2 only)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()

    cases = chat_cases()
    write_json(os.path.join(args.out, "chat_golden.json"), chat_golden_doc(cases))
    print(f"chat_golden.json: {len(cases)} cases", flush=True)
    if args.chat_only:
        return 0

    import tokenizers
    import transformers
    from tokenizers import Regex, normalizers, pre_tokenizers, processors, AddedToken

    texts, nbytes, nfiles = stdlib_corpus(args.max_bytes)
    print(f"corpus: {nfiles} files, {nbytes} bytes ({time.time() - t0:.1f}s)", flush=True)
    mixed = texts[len(texts) // 2][:3000]

    # qwen35 --------------------------------------------------------------
    q35 = train(texts, 4096, normalizers.NFC(), pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]))
    q35.post_processor = processors.ByteLevel(trim_offsets=False)
    q35_dir = os.path.join(args.out, "qwen35")
    q35 = save(q35, q35_dir, tokenizer_config(q35), CHATML_TEMPLATE)
    print(f"qwen35: {q35.get_vocab_size(with_added_tokens=True)} tokens ({time.time() - t0:.1f}s)", flush=True)

    # qwen2: legacy merges, added tokens with every flag ----------------------
    q2 = train(texts, 4096, normalizers.Sequence([normalizers.NFC()]), pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]))
    q2.add_tokens([AddedToken("<think>", special=False, normalized=False),
                   AddedToken("</think>", special=False, normalized=False),
                   AddedToken("xyzzy", single_word=True, special=False, normalized=False),
                   AddedToken("e\u0301clair", special=False, normalized=True)])
    q2.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False),
                           AddedToken("[SEP]", rstrip=True, special=True, normalized=False)])

    def legacy_merges(d):
        d["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in d["model"]["merges"]]
    q2 = rewrite(q2, legacy_merges)
    q2_dir = os.path.join(args.out, "qwen2")
    q2 = save(q2, q2_dir, tokenizer_config(q2, QWEN25_TEMPLATE))
    print(f"qwen2: {q2.get_vocab_size(with_added_tokens=True)} tokens ({time.time() - t0:.1f}s)", flush=True)

    # gpt2: ByteLevel with the GPT-2 regex and a prefix space, ignore_merges,
    # a Llama 3 style BOS template ------------------------------------------
    g2 = train(texts, 2048, None, pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True))
    eot = g2.token_to_id("<|endoftext|>")
    g2.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|endoftext|> $A", pair="<|endoftext|> $A <|endoftext|> $B:1",
                                      special_tokens=[("<|endoftext|>", eot)])])

    def ignore_merges(d):
        d["model"]["ignore_merges"] = True
    g2 = rewrite(g2, ignore_merges)
    g2_dir = os.path.join(args.out, "gpt2")
    g2 = save(g2, g2_dir)
    print(f"gpt2: {g2.get_vocab_size(with_added_tokens=True)} tokens ({time.time() - t0:.1f}s)", flush=True)

    tt = test_texts(mixed)
    golden = {
        "about": "golden ids of Hugging Face tokenizers for frt (scripts/ref/make_tokenizer.py)",
        "versions": {"python": sys.version.split()[0], "tokenizers": tokenizers.__version__,
                     "transformers": transformers.__version__},
        "corpus": {"files": nfiles, "bytes": nbytes},
        "tokenizers": {"qwen35": golden_for(q35, "qwen35", tt), "qwen2": golden_for(q2, "qwen2", tt),
                       "gpt2": golden_for(g2, "gpt2", tt)},
    }

    # transformers: the same ids, and apply_chat_template -------------------
    checks = {}
    env = jinja_env()
    chat = []
    for name, d in (("qwen35", q35_dir), ("qwen2", q2_dir)):
        tr, how = load_transformers(d)
        ref = q35 if name == "qwen35" else q2
        same = all(as_ids(tr(t, add_special_tokens=False)) == ref.encode(t, add_special_tokens=False).ids
                   for t in tt.values())
        checks[name] = {"loader": how, "class": type(tr).__name__, "ids_match_tokenizers": same}
        print(f"transformers {how} {type(tr).__name__} on {name}: ids match tokenizers: {same}", flush=True)
        # the directory's own template (chat_template.jinja / tokenizer_config.json)
        own = tr.chat_template
        checks[name]["dir_template"] = ("chatml" if own == CHATML_TEMPLATE else
                                        "qwen2.5" if own == QWEN25_TEMPLATE else repr(own)[:80])
        for case in cases:
            if name == "qwen2" and case["template"] not in ("qwen2.5", "qwen3"):
                continue
            conv = CONVERSATIONS[case["conversation"]]
            kw = {}
            if case["enable_thinking"] is not None:
                kw["enable_thinking"] = case["enable_thinking"]
            g = {"tokenizer": name, "template": case["template"], "conversation": case["conversation"],
                 "add_generation_prompt": case["add_generation_prompt"],
                 "enable_thinking": case["enable_thinking"]}
            template = CHAT_TEMPLATES[case["template"]]
            use_dir_template = own == template
            try:
                if use_dir_template:  # exercise transformers' own loading of the template
                    text = tr.apply_chat_template(conv, tokenize=False,
                                                  add_generation_prompt=case["add_generation_prompt"], **kw)
                    ids = tr.apply_chat_template(conv, tokenize=True,
                                                 add_generation_prompt=case["add_generation_prompt"], **kw)
                else:
                    text = tr.apply_chat_template(conv, chat_template=template, tokenize=False,
                                                  add_generation_prompt=case["add_generation_prompt"], **kw)
                    ids = tr.apply_chat_template(conv, chat_template=template, tokenize=True,
                                                 add_generation_prompt=case["add_generation_prompt"], **kw)
                g["text"] = text
                g["ids"] = as_ids(ids)
                if "error" in case or text != case["text"]:
                    print(f"WARNING: transformers and jinja differ on {g}", flush=True)
                    g["jinja_differs"] = True
                if g["ids"] != ref.encode(text, add_special_tokens=False).ids:
                    print(f"WARNING: apply_chat_template ids differ from encode(text) on {g}", flush=True)
                    g["encode_differs"] = True
            except Exception as e:  # noqa: BLE001 - templates raise on purpose
                g["error"] = str(e)
                if "error" not in case:
                    print(f"WARNING: transformers raised where jinja did not: {g}", flush=True)
            chat.append(g)
    golden["transformers_checks"] = checks
    golden["chat"] = chat
    write_json(os.path.join(args.out, "golden.json"), golden)
    sizes = {f: os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(args.out) for f in fs}
    print(f"written: {sizes} ({time.time() - t0:.1f}s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
