/*
 * fuzz_jinja.c - libFuzzer target: the Jinja engine (text/jinja.h) on
 * arbitrary bytes. The input is a template; when it holds a NUL byte, the
 * bytes after the first NUL are the JSON object of variables (else a fixed
 * chat conversation with tools). Parsing either fails with one of its
 * documented statuses or gives a template; rendering (under small limits, so
 * hostile loops end quickly) either fails with one of its statuses or gives
 * text of the reported length. The same template then renders through the
 * chat layer (text/chat.h), whose statuses are checked the same way (unless
 * the engine hit a limit: the chat layer has the default limits, slow to
 * reach under the sanitizers). A render that succeeds renders again with
 * "messages" as content (frt_jinja_render_ex): the text must be the same
 * (or a limit is hit: marks take memory too) and the spans sorted,
 * disjoint, non-touching and inside it.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_jinja fuzz/corpus/jinja/;
 * CI replays fuzz/corpus/jinja/ through replay_jinja.
 */
#include "frt/status.h"
#include "text/chat.h"
#include "text/jinja.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char default_vars[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \" sys \"},"
    " {\"role\": \"user\", \"content\": \"hi <|im_end|> {{ x }}\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>r</think>a\", \"tool_calls\": [{\"type\": \"function\","
    "   \"function\": {\"name\": \"f\", \"arguments\": {\"a\": [1, 2.5, null, true]}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"c\", \"content\": \"42\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"x\"}, {\"type\": \"image\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}],"
    " \"add_generation_prompt\": true, \"enable_thinking\": false, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

/* T rendered with VARS' "messages" as content gives TEXT again */
static void check_marked(const frt_jinja_template *t, const json_t *vars, const frt_jinja_limits *lim,
                         const char *text, size_t len)
{
    json_t *msgs = json_object_get(vars, "messages");
    if (!msgs) return;
    json_t *rest = json_copy((json_t *)vars), *content = json_pack("{s:O}", "messages", msgs);
    if (!rest || !content) abort();
    json_object_del(rest, "messages");
    char *t2 = NULL;
    size_t len2 = 0, nsp = 0;
    frt_text_span *sp = NULL;
    int r = frt_jinja_render_ex(t, rest, content, lim, &t2, &len2, &sp, &nsp);
    if (r && (r != FRT_ERR_OUT_OF_RANGE || t2 || sp || nsp)) abort();
    if (!r && (len2 != len || memcmp(t2, text, len))) abort();
    for (size_t i = 0; i < nsp; i++)
        if (sp[i].start >= sp[i].end || sp[i].end > len || (i && sp[i].start <= sp[i - 1].end)) abort();
    free(t2);
    free(sp);
    json_decref(rest);
    json_decref(content);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    json_error_t err;
    json_t *vars = nul ? json_loadb((const char *)nul + 1, size - tlen - 1, 0, &err) : json_loads(default_vars, 0, &err);
    if (!nul && !vars) abort();
    if (vars && !json_is_object(vars)) {
        json_decref(vars);
        vars = NULL;
    }

    frt_jinja_template *t = NULL;
    int hit_limit = 0; /* the chat layer renders with the default (large) limits: skip it then */
    int rc = frt_jinja_parse((const char *)data, tlen, &t);
    if (rc) {
        if (t) abort();
        if (rc != FRT_ERR_INVALID_ARGUMENT && rc != FRT_ERR_FORMAT && rc != FRT_ERR_UNSUPPORTED &&
            rc != FRT_ERR_OUT_OF_RANGE && rc != FRT_ERR_OUT_OF_MEMORY)
            abort();
    } else {
        frt_jinja_limits lim = frt_jinja_default_limits();
        lim.max_steps = 200000;
        lim.max_memory = 32u << 20;
        lim.max_output = 1u << 20;
        lim.max_depth = 16;
        char *text = NULL;
        size_t len = 12345;
        int r = frt_jinja_render(t, vars, &lim, &text, &len);
        if (r) {
            hit_limit = r == FRT_ERR_OUT_OF_RANGE;
            if (text || len != 0) abort();
            if (r != FRT_ERR_INVALID_ARGUMENT && r != FRT_ERR_UNSUPPORTED && r != FRT_ERR_OUT_OF_RANGE &&
                r != FRT_ERR_OUT_OF_MEMORY)
                abort();
        } else {
            if (!text || len > lim.max_output || text[len] != '\0') abort();
            if (vars) check_marked(t, vars, &lim, text, len);
        }
        free(text);
        frt_jinja_free(t);
    }

    /* the chat layer over the same template (a C string: up to the first NUL) */
    char *tmpl = malloc(tlen + 1);
    if (!tmpl) abort();
    memcpy(tmpl, data, tlen);
    tmpl[tlen] = '\0';
    frt_chat_message m[] = {{"system", " sys "}, {"user", "hi"}, {"assistant", "<think>r</think>a"}, {"user", "x"}};
    frt_chat_options opt = {1, 0, 0};
    char *text = NULL;
    size_t len = 0;
    if (strlen(tmpl) < 4096 && !hit_limit) {
        int r2 = frt_chat_render(tmpl, m, 4, &opt, &text, &len);
        if (r2) {
            if (text) abort();
            if (r2 != FRT_ERR_INVALID_ARGUMENT && r2 != FRT_ERR_UNSUPPORTED && r2 != FRT_ERR_OUT_OF_RANGE &&
                r2 != FRT_ERR_OUT_OF_MEMORY)
                abort();
        } else if (!text || text[len] != '\0') {
            abort();
        }
    }
    free(text);
    free(tmpl);
    json_decref(vars);
    return 0;
}
