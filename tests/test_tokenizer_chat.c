/* test_tokenizer_chat.c - chat templates: recognition of the ChatML family
 * and the native formatting, character for character against the Jinja
 * rendering of tests/data/tokenizer/chat_golden.json (made by
 * scripts/ref/make_tokenizer.py with transformers' Jinja environment), and
 * the refusal of everything else. */
#include "frt_test.h"
#include "text/chat.h"
#include "text/tokenizer.h"
#include "test_tokenizer_fixture.h"

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

static void test_unsupported(const json_t *templates)
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
    const char *chatml_bos =
        "{{ bos_token }}{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
        "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    const char *chatml_trim =
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] | trim "
        "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    const char *chatml_tail =
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
        "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\nSure:' }}{% endif %}";
    const char *tpl[] = {"", "hello", llama3, gemma, chatml_bos, chatml_trim, chatml_tail};
    frt_chat_message m = {"user", "hi"};
    for (size_t i = 0; i < sizeof tpl / sizeof tpl[0]; i++) {
        int kind = -5;
        CHECK_STATUS(frt_chat_template_kind(tpl[i], &kind, NULL), FRT_ERR_UNSUPPORTED);
        CHECK(strstr(frt_last_error(), "unsupported chat template") != NULL);
        CHECK(kind == 0);
        char *text = (char *)1;
        CHECK_STATUS(frt_chat_render(tpl[i], &m, 1, NULL, &text, NULL), FRT_ERR_UNSUPPORTED);
        CHECK(text == NULL);
    }
    /* the Qwen3.5 template with a different generation prompt is not Qwen3.5 */
    const char *q35 = json_string_value(json_object_get(templates, "qwen3.5"));
    if (q35) {
        const char *at = strstr(q35, "{{- '<think>\\n' }}");
        CHECK(at != NULL);
        if (at) {
            size_t pre = (size_t)(at - q35);
            char *mod = malloc(strlen(q35) + 32);
            memcpy(mod, q35, pre);
            strcpy(mod + pre, "{{- '<think>\\nOK' }}");
            strcat(mod, at + strlen("{{- '<think>\\n' }}"));
            CHECK_STATUS(frt_chat_template_kind(mod, &(int){0}, NULL), FRT_ERR_UNSUPPORTED);
            free(mod);
        }
    }
    /* messages frt does not format */
    const char *chatml = json_string_value(json_object_get(templates, "chatml"));
    char *text = NULL;
    frt_chat_message tool = {"tool", "{}"};
    CHECK_STATUS(frt_chat_render(chatml, &tool, 1, NULL, &text, NULL), FRT_ERR_UNSUPPORTED);
    CHECK(strstr(frt_last_error(), "tool") != NULL);
    CHECK_STATUS(frt_chat_render(chatml, &m, 0, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    frt_chat_message null_content = {"user", NULL};
    CHECK_STATUS(frt_chat_render(chatml, &null_content, 1, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    frt_chat_message bad_utf8 = {"user", "\xff"};
    CHECK_STATUS(frt_chat_render(chatml, &bad_utf8, 1, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_chat_render(NULL, &m, 1, NULL, &text, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_chat_template_kind(NULL, &(int){0}, NULL), FRT_ERR_INVALID_ARGUMENT);
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
    frt_tokenizer_set_chat_template(tok, "{{ messages }}");
    CHECK_STATUS(frt_chat_encode(tok, msgs, 2, NULL, &ids, &n), FRT_ERR_UNSUPPORTED);
    CHECK(ids == NULL && n == 0);
    CHECK_STATUS(frt_chat_format(NULL, msgs, 2, 1, &text), FRT_ERR_INVALID_ARGUMENT);
    frt_tokenizer_free(tok);
}

int main(void)
{
    json_t *g = load_golden();
    if (!g) return frt_test_report();
    const json_t *templates = json_object_get(g, "templates");
    test_kinds(templates);
    test_golden_cases(g);
    test_unsupported(templates);
    test_with_tokenizer(templates);
    json_decref(g);
    return frt_test_report();
}
