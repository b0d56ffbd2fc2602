/*
 * serving/api_logprobs.c - the logprobs objects of the OpenAI-compatible
 * answers (api.h, docs/serving.md), from the records of the sampling steps
 * (frt/sampling.h) and the engine's token bytes:
 *   chat (OpenAI chat completions): {"content": [{token, logprob, bytes,
 *     top_logprobs: [{token, logprob, bytes}]}]};
 *   completions (OpenAI legacy completions): {tokens, token_logprobs,
 *     top_logprobs: [{token: logprob}], text_offset}.
 * A token's string is its bytes when they are valid UTF-8, with each byte
 * of a partial character written as \xHH (OpenAI's form: "\xe4\xbd" for
 * the first two bytes of a three-byte character); `bytes` is always the
 * exact byte list. A logprob of -inf (a masked token) is written as -9999.0,
 * OpenAI's value for "very unlikely" (JSON has no infinity).
 */
#include "serving/api.h"
#include "serving/text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static json_t *lp_value(float v) { return json_real(v >= -9999.0f ? (double)v : -9999.0); }

/* The engine's bytes of id; "" for an id it cannot name (never expected). */
static void token_bytes(const frt_engine *e, int32_t id, const char **b, size_t *n)
{
    if (e->token_bytes(e->self, id, b, n)) {
        *b = "";
        *n = 0;
    }
}

static json_t *token_string(const char *b, size_t n)
{
    size_t len = 0;
    char *s = frt_utf8_escape_invalid(b, n, &len);
    json_t *j = s ? json_stringn(s, len) : NULL;
    free(s);
    return j;
}

/* {token, logprob, bytes} of one token. */
static json_t *chat_entry(const frt_engine *e, int32_t id, float logprob)
{
    const char *b;
    size_t n;
    token_bytes(e, id, &b, &n);
    json_t *o = json_object(), *bytes = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(bytes, json_integer((unsigned char)b[i]));
    json_object_set_new(o, "token", token_string(b, n));
    json_object_set_new(o, "logprob", lp_value(logprob));
    json_object_set_new(o, "bytes", bytes);
    return o;
}

static json_t *chat_logprobs(const frt_engine *e, const frt_logprobs *lp, int n)
{
    json_t *content = json_array();
    for (int i = 0; i < n; i++) {
        json_t *x = chat_entry(e, lp[i].token, lp[i].logprob), *top = json_array();
        for (int k = 0; k < lp[i].n_top; k++)
            json_array_append_new(top, chat_entry(e, lp[i].top_token[k], lp[i].top_logprob[k]));
        json_object_set_new(x, "top_logprobs", top);
        json_array_append_new(content, x);
    }
    json_t *o = json_object();
    json_object_set_new(o, "content", content);
    return o;
}

/* The character offset of the next token's first byte in the text so far,
 * then appends the token's bytes. Characters are those of the UTF-8-
 * repaired text (frt_utf8_sanitize), counted over the settled prefix (no
 * partial character at its end: later bytes cannot change it) plus the
 * unsettled tail. */
static int text_advance(frt_api_lp_text *t, const char *b, size_t n, size_t *offset)
{
    *offset = t->chars + frt_utf8_repaired_chars(t->raw + t->settled, t->n - t->settled);
    if (t->n + n > t->cap) {
        size_t nc = (t->n + n) * 2 + 64;
        char *nr = realloc(t->raw, nc);
        if (!nr) return -1;
        t->raw = nr;
        t->cap = nc;
    }
    memcpy(t->raw + t->n, b, n);
    t->n += n;
    size_t settled = frt_utf8_complete_len(t->raw, t->n);
    t->chars += frt_utf8_repaired_chars(t->raw + t->settled, settled - t->settled);
    t->settled = settled;
    return 0;
}

static json_t *completion_logprobs(const frt_engine *e, const frt_logprobs *lp, int n, frt_api_lp_text *t)
{
    json_t *tokens = json_array(), *values = json_array(), *tops = json_array(), *offsets = json_array();
    int oom = 0;
    for (int i = 0; i < n; i++) {
        const char *b;
        size_t len, off = 0;
        token_bytes(e, lp[i].token, &b, &len);
        json_array_append_new(tokens, token_string(b, len));
        json_array_append_new(values, lp_value(lp[i].logprob));
        json_t *top = json_object();
        for (int k = 0; k < lp[i].n_top; k++) {
            const char *tb;
            size_t tl;
            token_bytes(e, lp[i].top_token[k], &tb, &tl);
            char *key = frt_utf8_escape_invalid(tb, tl, NULL);
            if (key && !json_object_get(top, key)) json_object_set_new(top, key, lp_value(lp[i].top_logprob[k]));
            free(key);
        }
        json_array_append_new(tops, top);
        oom |= text_advance(t, b, len, &off);
        json_array_append_new(offsets, json_integer((json_int_t)off));
    }
    json_t *o = json_object();
    json_object_set_new(o, "tokens", tokens);
    json_object_set_new(o, "token_logprobs", values);
    json_object_set_new(o, "top_logprobs", tops);
    json_object_set_new(o, "text_offset", offsets);
    if (oom) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *frt_api_logprobs_json(const frt_api_ident *id, const frt_engine *e, const frt_logprobs *lp, int n,
                              frt_api_lp_text *t)
{
    if (!e || !e->token_bytes || !lp) return json_null();
    if (id->chat) return chat_logprobs(e, lp, n);
    frt_api_lp_text local = {0};
    json_t *o = completion_logprobs(e, lp, n, t ? t : &local);
    frt_api_lp_text_free(&local);
    return o;
}

void frt_api_lp_text_free(frt_api_lp_text *t)
{
    if (!t) return;
    free(t->raw);
    memset(t, 0, sizeof *t);
}

json_t *frt_api_result_logprobs_json(const frt_api_ident *id, const frt_gen_result *res)
{
    if (!res || !res->logprobs) return json_null();
    return frt_api_logprobs_json(id, res->lp_engine, res->logprobs, res->n_logprobs, NULL);
}
