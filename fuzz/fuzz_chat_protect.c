/*
 * fuzz_chat_protect.c - libFuzzer target: arbitrary messages through a real
 * chat template (the Qwen3.5 template of tests/data/tokenizer/
 * chat_golden.json: macros, tool calls, reasoning, multimodal parts) with
 * the content-span path, and the demo model's tokenizer.
 *
 * The input, up to its first NUL, is a JSON array of messages; anything
 * else becomes the content of one user message (when it is UTF-8). A render
 * either fails with a documented status, or gives spans that are sorted,
 * disjoint and inside the text; then the protected encode decodes back to
 * the text with no special id over a span byte, and
 * parse_special_in_content gives exactly frt_tokenizer_encode's ids.
 *
 * Build: make fuzz (clang) -> build-fuzz/fuzz/fuzz_chat_protect CORPUS;
 * CI replays fuzz/corpus/chat_protect/ through replay_chat_protect.
 */
#include "frt/status.h"
#include "text/chat.h"
#include "text/tok_internal.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static frt_tokenizer *the_tokenizer(void)
{
    static frt_tokenizer *tok;
    if (tok) return tok;
    if (frt_tokenizer_load(FRT_SOURCE_DIR "/models/frt-demo", &tok)) abort();
    json_error_t err;
    json_t *g = json_load_file(FRT_SOURCE_DIR "/tests/data/tokenizer/chat_golden.json", 0, &err);
    const char *tmpl = json_string_value(json_object_get(json_object_get(g, "templates"), "qwen3.5"));
    if (!tmpl || frt_tokenizer_set_chat_template(tok, tmpl)) abort();
    json_decref(g);
    return tok;
}

static int allowed(int rc)
{
    return rc == FRT_ERR_INVALID_ARGUMENT || rc == FRT_ERR_UNSUPPORTED || rc == FRT_ERR_OUT_OF_RANGE ||
           rc == FRT_ERR_OUT_OF_MEMORY;
}

/* the checks of one rendered request */
static void check(const frt_tokenizer *tok, frt_chat_request *req)
{
    char *text = NULL;
    size_t len = 0, nsp = 0;
    frt_text_span *sp = NULL;
    int rc = frt_chat_format_json_spans(tok, req, &text, &len, &sp, &nsp);
    if (rc) {
        if (!allowed(rc) || text || sp || nsp) abort();
        return;
    }
    for (size_t i = 0; i < nsp; i++)
        if (sp[i].start >= sp[i].end || sp[i].end > len || (i && sp[i].start <= sp[i - 1].end)) abort();
    int32_t *ids = NULL, *plain = NULL, *flag = NULL;
    size_t n = 0, np = 0, nf = 0;
    if (frt_chat_encode_json(tok, req, &ids, &n) || frt_tokenizer_encode(tok, text, len, &plain, &np)) abort();
    req->parse_special_in_content = 1;
    if (frt_chat_encode_json(tok, req, &flag, &nf)) abort();
    if (nf != np || (np && memcmp(flag, plain, np * sizeof *plain))) abort();
    char *back = NULL;
    size_t nb = 0;
    if (frt_tokenizer_decode(tok, ids, n, &back, &nb) || nb != len || memcmp(back, text, len)) abort();
    size_t off = 0, k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t end = off + tok->tokens[ids[i]].bytes_len;
        while (k < nsp && sp[k].end <= off) k++;
        if (frt_tokenizer_is_special(tok, ids[i]) && k < nsp && sp[k].start < end) abort();
        off = end;
    }
    free(back);
    free(ids);
    free(plain);
    free(flag);
    free(text);
    free(sp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const frt_tokenizer *tok = the_tokenizer();
    const uint8_t *nul = memchr(data, 0, size);
    size_t n = nul ? (size_t)(nul - data) : size;
    json_error_t err;
    json_t *msgs = json_loadb((const char *)data, n, 0, &err);
    if (!json_is_array(msgs)) {
        json_decref(msgs);
        msgs = json_pack("[{s:s, s:s%}]", "role", "user", "content", (const char *)data, n);
        if (!msgs) return 0; /* not UTF-8 */
    }
    frt_chat_request req = {.messages = msgs, .add_generation_prompt = 1};
    check(tok, &req);
    json_decref(msgs);
    return 0;
}
