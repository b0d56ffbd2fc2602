/* test_tokenizer_chat.c - chat templates (text/chat.h): the templates of
 * tests/data/tokenizer/chat_golden.json executed by the Jinja engine,
 * character for character against the Jinja rendering stored there (made by
 * scripts/ref/make_tokenizer.py with transformers' Jinja environment); the
 * legacy ChatML classifier; the JSON entry points (tools, tool calls, extra
 * kwargs, special tokens) and every bad-input path. tests/sh/
 * jinja_reference.sh compares many more templates and conversations with
 * python3-jinja2. */
#include "frt_test.h"
#include "text/chat.h"
#include "frt/tokenizer.h"
#include "test_tokenizer_fixture.h"

#include <unistd.h>

static json_t *load_golden(void)
{
    json_error_t err;
    json_t *g = json_load_file(FRT_TEST_DATA "/tokenizer/chat_golden.json", 0, &err);
    CHECK_MSG(g != NULL, "chat_golden.json: %s", err.text);
    return g;
}

static void test_kinds(const json_t *templates)
{
    struct {
        const char *name;
        int kind;
        const char *def;
    } exp[] = {
        {"chatml", FRT_CHAT_CHATML, NULL},
        {"qwen2", FRT_CHAT_CHATML, "You are a helpful assistant."},
        {"qwen2.5", FRT_CHAT_CHATML, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."},
        {"qwen3", FRT_CHAT_QWEN3, NULL},
        {"qwen3.5", FRT_CHAT_QWEN35, NULL},
    };
    for (size_t i = 0; i < sizeof exp / sizeof exp[0]; i++) {
        const char *t = json_string_value(json_object_get(templates, exp[i].name));
        CHECK(t != NULL);
        if (!t) continue;
        int kind = 0;
        char *def = NULL;
        CHECK_OK(frt_chat_template_kind(t, &kind, &def));
        CHECK_MSG(kind == exp[i].kind, "%s: kind %d", exp[i].name, kind);
        CHECK_MSG((def == NULL && exp[i].def == NULL) || (def && exp[i].def && !strcmp(def, exp[i].def)),
                  "%s: default system \"%s\"", exp[i].name, def ? def : "(none)");
        free(def);
    }
}

static void test_golden_cases(const json_t *g)
{
    const json_t *templates = json_object_get(g, "templates"), *convs = json_object_get(g, "conversations");
    const json_t *cases = json_object_get(g, "cases");
    CHECK(json_array_size(cases) > 100);
    size_t i, n_err = 0, n_text = 0;
    const json_t *c;
    json_array_foreach(cases, i, c) {
        const char *tname = json_string_value(json_object_get(c, "template"));
        const char *tmpl = json_string_value(json_object_get(templates, tname));
        const json_t *conv = json_array_get(convs, (size_t)json_integer_value(json_object_get(c, "conversation")));
        frt_chat_options opt;
        frt_chat_message msgs[16];
        int n = chat_case_messages(c, conv, msgs, &opt);
        char *text = NULL;
        size_t len = 0;
        int rc = frt_chat_render(tmpl, msgs, n, &opt, &text, &len);
        const json_t *want = json_object_get(c, "text");
        if (json_is_string(want)) {
            n_text++;
            int same = rc == 0 && len == json_string_length(want) && !memcmp(text, json_string_value(want), len);
            CHECK_MSG(same, "case %zu (%s, conversation %lld, gen %d, thinking %d): rc %s %s\n got: %s\nwant: %s", i,
                      tname, (long long)json_integer_value(json_object_get(c, "conversation")), opt.add_generation_prompt,
                      opt.enable_thinking, frt_status_name(rc), frt_last_error(), text ? text : "(null)",
                      json_string_value(want));
        } else {
            n_err++;
            /* the template raises (Qwen3.5: no user query, system not first) */
            CHECK_MSG(rc == FRT_ERR_INVALID_ARGUMENT && text == NULL, "case %zu (%s): want the template's error (%s), got %s",
                      i, tname, json_string_value(json_object_get(c, "error")), frt_status_name(rc));
            const char *e = json_string_value(json_object_get(c, "error"));
            CHECK_MSG(e && strstr(frt_last_error(), e), "case %zu: message \"%s\" does not hold \"%s\"", i,
                      frt_last_error(), e ? e : "");
        }
        free(text);
    }
    CHECK(n_err > 0 && n_text > 100);
}

static void test_other_templates(const json_t *templates)
{
    const char *llama3 =
        "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
        "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
        "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
    const char *gemma =
        "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' + "
        "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}"
        "{{'<start_of_turn>model\\n'}}{% endif %}";
    const char *chatml_tail =
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
        "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\nSure:' }}{% endif %}";
    /* the legacy classifier still refuses what is not ChatML... */
    const char *tpl[] = {"", "hello", llama3, gemma, chatml_tail};
    for (size_t i = 0; i < sizeof tpl / sizeof tpl[0]; i++) {
        int kind = -5;
        CHECK_STATUS(frt_chat_template_kind(tpl[i], &kind, NULL), FRT_ERR_UNSUPPORTED);
        CHECK(strstr(frt_last_error(), "unsupported chat template") != NULL);
        CHECK(kind == 0);
    }
    /* ...while rendering executes any template */
    frt_chat_message m[] = {{"user", "  hi  "}};
    char *text = (char *)1;
    size_t len = 0;
    CHECK_OK(frt_chat_render(gemma, m, 1, NULL, &text, &len));
    CHECK(text && !strcmp(text, "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n") && len == strlen(text));
    free(text);
    CHECK_OK(frt_chat_render(chatml_tail, m, 1, NULL, &text, NULL));
    CHECK(text && !strcmp(text, "<|im_start|>user\n  hi  <|im_end|>\n<|im_start|>assistant\nSure:"));
    free(text);
    CHECK_OK(frt_chat_render("hello", m, 1, NULL, &text, NULL));
    CHECK(text && !strcmp(text, "hello"));
    free(text);
    /* llama3 needs bos_token: undefined without special tokens (as in Jinja: undefined + str fails) */
    text = (char *)1;
    CHECK_STATUS(frt_chat_render(llama3, m, 1, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK(text == NULL && strstr(frt_last_error(), "'bos_token' is undefined"));
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", " hi ");
    json_t *special = json_pack("{s:s}", "bos_token", "<|begin_of_text|>");
    frt_chat_request req = {.messages = msgs, .add_generation_prompt = 1};
    CHECK_OK(frt_chat_render_json(llama3, &req, special, &text, NULL));
    CHECK(text && !strcmp(text, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
                                "<|start_header_id|>assistant<|end_header_id|>\n\n"));
    free(text);
    json_decref(msgs);
    json_decref(special);
    /* a template that does not parse, or uses what frt does not implement: unsupported, with the position */
    CHECK_STATUS(frt_chat_render("{% if messages %}", m, 1, NULL, &text, NULL), FRT_ERR_UNSUPPORTED);
    CHECK(text == NULL && strstr(frt_last_error(), "unsupported chat template: line 1, column 18"));
    CHECK_STATUS(frt_chat_render("{{ messages | frobnicate }}", m, 1, NULL, &text, NULL), FRT_ERR_UNSUPPORTED);
    CHECK(strstr(frt_last_error(), "filter 'frobnicate' is not supported"));
    /* the template's own rejection (Qwen3.5: no user query) */
    const char *q35 = json_string_value(json_object_get(templates, "qwen3.5"));
    frt_chat_message sys_only[] = {{"system", "S"}};
    CHECK_STATUS(frt_chat_render(q35, sys_only, 1, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "No user query found in messages."));
    /* any role reaches the template */
    const char *chatml = json_string_value(json_object_get(templates, "chatml"));
    frt_chat_message tool = {"tool", "{}"};
    CHECK_OK(frt_chat_render(chatml, &tool, 1, NULL, &text, NULL));
    CHECK(text && !strcmp(text, "<|im_start|>tool\n{}<|im_end|>\n<|im_start|>assistant\n"));
    free(text);
    /* bad plain messages */
    CHECK_STATUS(frt_chat_render(chatml, m, 0, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    frt_chat_message null_content = {"user", NULL};
    CHECK_STATUS(frt_chat_render(chatml, &null_content, 1, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    frt_chat_message bad_utf8 = {"user", "\xff"};
    CHECK_STATUS(frt_chat_render(chatml, &bad_utf8, 1, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    frt_chat_message bad_role = {"\xc3", "x"};
    CHECK_STATUS(frt_chat_render(chatml, &bad_role, 1, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_chat_render(NULL, m, 1, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_chat_render(chatml, NULL, 1, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_chat_render(chatml, m, 1, NULL, NULL, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_chat_template_kind(NULL, &(int){0}, NULL), FRT_ERR_INVALID_ARGUMENT);
}

/* tools, tool calls and tool results through the JSON entry point, with the
 * Qwen2.5 template of the golden file */
static void test_json_api(const json_t *templates)
{
    const char *q25 = json_string_value(json_object_get(templates, "qwen2.5"));
    const char *q3 = json_string_value(json_object_get(templates, "qwen3"));
    json_error_t err;
    json_t *msgs = json_loads("[{\"role\": \"user\", \"content\": \"Weather?\"},"
                              " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\","
                              "   \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}]},"
                              " {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"21C\"}]", 0, &err);
    json_t *tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\":"
                               " {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}]", 0, &err);
    CHECK(msgs && tools);
    frt_chat_request req = {.messages = msgs, .tools = tools, .add_generation_prompt = 1};
    char *text = NULL;
    CHECK_OK(frt_chat_render_json(q25, &req, NULL, &text, NULL));
    /* the tool schema, the call and the result are in the prompt, as Qwen2.5's template writes them */
    CHECK(text && strstr(text, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
                               "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}\n</tools>"));
    CHECK(text && strstr(text, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                               "{\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"));
    CHECK(text && strstr(text, "<|im_start|>user\n<tool_response>\n21C\n</tool_response><|im_end|>\n<|im_start|>assistant\n"));
    free(text);
    /* no tools: the template sees None */
    req.tools = NULL;
    CHECK_OK(frt_chat_render_json(q25, &req, NULL, &text, NULL));
    CHECK(text && !strstr(text, "<tools>") && strstr(text, "You are Qwen"));
    free(text);
    /* extra kwargs reach the template */
    json_t *kw = json_pack("{s:b}", "enable_thinking", 0);
    json_t *one = json_pack("[{s:s, s:s}]", "role", "user", "content", "hi");
    frt_chat_request r2 = {.messages = one, .kwargs = kw, .add_generation_prompt = 1};
    CHECK_OK(frt_chat_render_json(q3, &r2, NULL, &text, NULL));
    CHECK(text && !strcmp(text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    free(text);
    r2.add_generation_prompt = 0;
    CHECK_OK(frt_chat_render_json(q3, &r2, NULL, &text, NULL));
    CHECK(text && !strcmp(text, "<|im_start|>user\nhi<|im_end|>\n"));
    free(text);
    /* kwargs override special tokens, as transformers merges them */
    json_t *sp = json_pack("{s:s}", "bos_token", "<s>");
    json_t *kw2 = json_pack("{s:s}", "bos_token", "<B>");
    frt_chat_request r3 = {.messages = one, .kwargs = kw2};
    CHECK_OK(frt_chat_render_json("{{ bos_token }}|{{ eos_token }}|{{ tools }}|{{ documents }}|{{ add_generation_prompt }}",
                                  &r3, sp, &text, NULL));
    CHECK(text && !strcmp(text, "<B>||None|None|False"));
    free(text);
    json_t *docs = json_pack("[{s:s, s:s}]", "title", "T", "text", "body");
    r3.documents = docs;
    CHECK_OK(frt_chat_render_json("{% for d in documents %}{{ d.title }}: {{ d.text }}{% endfor %}", &r3, NULL, &text, NULL));
    CHECK(text && !strcmp(text, "T: body"));
    free(text);
    r3.documents = kw2;
    CHECK_STATUS(frt_chat_render_json("x", &r3, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK(text == NULL && strstr(frt_last_error(), "documents must be a JSON array"));
    json_decref(docs);
    /* bad inputs */
    text = (char *)1;
    frt_chat_request bad = {.messages = kw};
    CHECK_STATUS(frt_chat_render_json(q25, &bad, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK(text == NULL && strstr(frt_last_error(), "messages must be a JSON array"));
    bad = (frt_chat_request){.messages = one, .tools = kw};
    CHECK_STATUS(frt_chat_render_json(q25, &bad, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    bad = (frt_chat_request){.messages = one, .kwargs = one};
    CHECK_STATUS(frt_chat_render_json(q25, &bad, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    json_t *reserved = json_pack("{s:[]}", "messages");
    bad = (frt_chat_request){.messages = one, .kwargs = reserved};
    CHECK_STATUS(frt_chat_render_json(q25, &bad, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(frt_last_error(), "may not set 'messages'"));
    bad = (frt_chat_request){.messages = one};
    CHECK_STATUS(frt_chat_render_json(q25, &bad, one, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_chat_render_json(NULL, &bad, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_chat_render_json(q25, NULL, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_chat_render_json(q25, &bad, NULL, NULL, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_chat_format_json(NULL, &bad, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    /* a message the template cannot handle: content null where the template concatenates it */
    json_t *nullc = json_pack("[{s:s, s:n}]", "role", "user", "content");
    bad = (frt_chat_request){.messages = nullc};
    CHECK_STATUS(frt_chat_render_json(q25, &bad, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK(text == NULL && strstr(frt_last_error(), "unsupported operand type(s) for +: 'str' and 'NoneType'"));
    json_decref(nullc);
    json_decref(reserved);
    json_decref(sp);
    json_decref(kw2);
    json_decref(kw);
    json_decref(one);
    json_decref(msgs);
    json_decref(tools);
}

static void test_with_tokenizer(const json_t *templates)
{
    tokfx f = {.added_tokens = TOKFX_SPECIALS, .pre_tokenizer = TOKFX_QWEN35_PRE, .normalizer = "{\"type\":\"NFC\"}"};
    char *json = tokfx_json(&f);
    frt_tokenizer *tok = NULL;
    CHECK_OK(frt_tokenizer_load_json(json, strlen(json), &tok));
    free(json);
    if (!tok) return;
    frt_chat_message msgs[] = {{"system", "S"}, {"user", "hi"}};
    char *text = (char *)1;
    /* no template: a clear refusal */
    CHECK_STATUS(frt_chat_format(tok, msgs, 2, 1, &text), FRT_ERR_UNSUPPORTED);
    CHECK(text == NULL && strstr(frt_last_error(), "unsupported chat template"));
    CHECK_OK(frt_tokenizer_set_chat_template(tok, json_string_value(json_object_get(templates, "chatml"))));
    CHECK_OK(frt_chat_format(tok, msgs, 2, 1, &text));
    CHECK(text && !strcmp(text, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"));
    free(text);
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(frt_chat_encode(tok, msgs, 2, NULL, &ids, &n));
    int32_t st = frt_tokenizer_token_id(tok, "<|im_start|>"), en = frt_tokenizer_token_id(tok, "<|im_end|>");
    /* <|im_start|> s y s t e m \n S <|im_end|> \n ... : the specials are single ids */
    const int32_t exp[] = {st, 's', 'y', 's', 't', 'e', 'm', '\n', 'S', en, '\n', st, 'u', 's', 'e', 'r', '\n',
                           'h', 'i', en, '\n', st, 'a', 's', 's', 'i', 's', 't', 'a', 'n', 't', '\n'};
    CHECK(n == sizeof exp / sizeof exp[0] && ids && !memcmp(ids, exp, sizeof exp));
    free(ids);
    /* the JSON entry points give the same */
    json_t *jm = json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content", "S", "role", "user", "content", "hi");
    frt_chat_request req = {.messages = jm, .add_generation_prompt = 1};
    CHECK_OK(frt_chat_encode_json(tok, &req, &ids, &n));
    CHECK(n == sizeof exp / sizeof exp[0] && ids && !memcmp(ids, exp, sizeof exp));
    free(ids);
    /* the tokenizer's special tokens reach the template */
    CHECK(frt_tokenizer_special_token(tok, "bos_token") == NULL);
    CHECK_OK(frt_tokenizer_set_special_token(tok, "bos_token", "<|im_start|>"));
    CHECK_OK(frt_tokenizer_set_chat_template(tok, "{{ bos_token }}{{ eos_token is defined }}{{ messages[1].content }}"));
    CHECK_OK(frt_chat_format_json(tok, &req, &text, NULL));
    CHECK(text && !strcmp(text, "<|im_start|>Falsehi"));
    free(text);
    CHECK_OK(frt_tokenizer_set_special_token(tok, "bos_token", NULL));
    CHECK(frt_tokenizer_special_token(tok, "bos_token") == NULL);
    CHECK_STATUS(frt_tokenizer_set_special_token(tok, "sep_token", "x"), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_tokenizer_set_special_token(NULL, "bos_token", "x"), FRT_ERR_INVALID_ARGUMENT);
    CHECK(frt_tokenizer_special_token(tok, "sep_token") == NULL && frt_tokenizer_special_token(NULL, "bos_token") == NULL);
    json_decref(jm);
    frt_tokenizer_set_chat_template(tok, "{% for %}");
    CHECK_STATUS(frt_chat_encode(tok, msgs, 2, NULL, &ids, &n), FRT_ERR_UNSUPPORTED);
    CHECK(ids == NULL && n == 0);
    CHECK_STATUS(frt_chat_format(NULL, msgs, 2, 1, &text), FRT_ERR_INVALID_ARGUMENT);
    frt_tokenizer_free(tok);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* tokenizer_config.json's special tokens: loaded with the tokenizer, seen by the template */
static void test_load_special_tokens(void)
{
    char dir[] = "/tmp/frt_chat_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    tokfx f = {.added_tokens = TOKFX_SPECIALS, .pre_tokenizer = TOKFX_QWEN35_PRE, .normalizer = "{\"type\":\"NFC\"}"};
    char *json = tokfx_json(&f);
    write_file(dir, "tokenizer.json", json);
    free(json);
    write_file(dir, "tokenizer_config.json",
               "{\"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<B>\"}, \"eos_token\": \"<E>\", \"pad_token\": null,"
               " \"unk_token\": 7, \"chat_template\": \"{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"
               "{{ pad_token is defined }}{{ unk_token is defined }}\"}");
    frt_tokenizer *tok = NULL;
    CHECK_OK(frt_tokenizer_load(dir, &tok));
    CHECK(tok && !strcmp(frt_tokenizer_special_token(tok, "bos_token"), "<B>"));
    CHECK(tok && !strcmp(frt_tokenizer_special_token(tok, "eos_token"), "<E>"));
    CHECK(tok && !frt_tokenizer_special_token(tok, "pad_token") && !frt_tokenizer_special_token(tok, "unk_token"));
    frt_chat_message m = {"user", "x"};
    char *text = NULL;
    CHECK_OK(frt_chat_format(tok, &m, 1, 1, &text));
    CHECK(text && !strcmp(text, "<B>x<E>FalseFalse"));
    free(text);
    frt_tokenizer_free(tok);
    /* with chat_template.jinja the config is still read for the tokens; a broken one fails the load */
    write_file(dir, "chat_template.jinja", "{{ eos_token }}");
    write_file(dir, "tokenizer_config.json", "{\"eos_token\": ");
    tok = (frt_tokenizer *)1;
    CHECK_STATUS(frt_tokenizer_load(dir, &tok), FRT_ERR_FORMAT);
    CHECK(tok == NULL);
    write_file(dir, "tokenizer_config.json", "[]");
    CHECK_STATUS(frt_tokenizer_load(dir, &tok), FRT_ERR_FORMAT);
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    unlink(path);
    CHECK_OK(frt_tokenizer_load(dir, &tok));
    CHECK(tok && frt_tokenizer_special_token(tok, "eos_token") == NULL);
    frt_tokenizer_free(tok);
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    json_t *g = load_golden();
    if (!g) return frt_test_report();
    const json_t *templates = json_object_get(g, "templates");
    test_kinds(templates);
    test_golden_cases(g);
    test_other_templates(templates);
    test_json_api(templates);
    test_with_tokenizer(templates);
    test_load_special_tokens();
    json_decref(g);
    return frt_test_report();
}
