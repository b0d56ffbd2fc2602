/*
 * api_tokens.c - the token endpoints (serving/api_tokens.h): parse the
 * bodies of /tokenize and /detokenize, and answer them through the engine's
 * tokenizer. Tested in tests/sh/serve_scenarios.bash (scenario_tokens) and
 * fuzz/fuzz_serving_tokens.c.
 */
#include "serving/api_tokens.h"

#include "serving/text.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

void frt_api_tokens_clear(frt_api_tokens *t)
{
    if (!t) return;
    free(t->text);
    free(t->ids);
    memset(t, 0, sizeof *t);
}

/* The members a body may have: tokenize's, or detokenize's. */
static int member_known(const char *key, int detokenize)
{
    static const char *const tok[] = {"content", "with_pieces", "add_special", "parse_special", NULL};
    static const char *const detok[] = {"tokens", NULL};
    for (const char *const *k = detokenize ? detok : tok; *k; k++)
        if (!strcmp(key, *k)) return 1;
    return 0;
}

/* Refuses the first member that is not the endpoint's. */
static int check_members(json_t *o, int detokenize, frt_api_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        (void)v;
        if (!member_known(key, detokenize))
            return frt_api_fail(err, 400, "unsupported_parameter", key, "Unsupported parameter: '%s'", key);
    }
    return 0;
}

/* An optional boolean member: *out keeps its value when absent. */
static int opt_bool(json_t *o, const char *key, int *out, frt_api_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) return frt_api_fail(err, 400, "invalid_type", key, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

static int parse_tokenize(json_t *o, frt_api_tokens *out, frt_api_error *err)
{
    json_t *c = json_object_get(o, "content");
    if (!c) return frt_api_fail(err, 400, "missing_required_parameter", "content", "'content' is required");
    if (!json_is_string(c)) return frt_api_fail(err, 400, "invalid_type", "content", "'content' must be a string");
    int add_special = 0, parse_special = 1;
    if (opt_bool(o, "with_pieces", &out->with_pieces, err) || opt_bool(o, "add_special", &add_special, err) ||
        opt_bool(o, "parse_special", &parse_special, err))
        return -1;
    if (add_special)
        return frt_api_fail(err, 400, "unsupported_value", "add_special",
                            "'add_special': true is not supported (frt's tokenizer adds no special tokens)");
    if (!parse_special)
        return frt_api_fail(err, 400, "unsupported_value", "parse_special",
                            "'parse_special': false is not supported (special tokens in the text are always matched)");
    out->len = json_string_length(c);
    out->text = malloc(out->len + 1);
    if (!out->text) return frt_api_fail(err, 500, "out_of_memory", NULL, "out of memory");
    memcpy(out->text, json_string_value(c), out->len + 1);
    return 0;
}

static int parse_detokenize(json_t *o, int vocab, frt_api_tokens *out, frt_api_error *err)
{
    json_t *a = json_object_get(o, "tokens");
    if (!a) return frt_api_fail(err, 400, "missing_required_parameter", "tokens", "'tokens' is required");
    if (!json_is_array(a))
        return frt_api_fail(err, 400, "invalid_type", "tokens", "'tokens' must be an array of token ids");
    out->n_ids = json_array_size(a);
    out->ids = malloc((out->n_ids ? out->n_ids : 1) * sizeof *out->ids);
    if (!out->ids) return frt_api_fail(err, 500, "out_of_memory", NULL, "out of memory");
    for (size_t i = 0; i < out->n_ids; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v))
            return frt_api_fail(err, 400, "invalid_type", "tokens", "'tokens' element %zu is not an integer", i);
        json_int_t id = json_integer_value(v);
        if (id < 0 || id >= vocab)
            return frt_api_fail(err, 400, "invalid_value", "tokens",
                                "'tokens' element %zu (%lld) is outside the vocabulary [0, %d)", i, (long long)id,
                                vocab);
        out->ids[i] = (int32_t)id;
    }
    return 0;
}

int frt_api_parse_tokens(const char *body, size_t len, int detokenize, int vocab, frt_api_tokens *out,
                         frt_api_error *err)
{
    memset(out, 0, sizeof *out);
    out->detokenize = detokenize;
    json_error_t je;
    json_t *o = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
    int rc = 0;
    if (!o) rc = frt_api_fail(err, 400, "invalid_json", NULL, "The body is not valid JSON: %s", je.text);
    else if (!json_is_object(o)) rc = frt_api_fail(err, 400, "invalid_json", NULL, "The body must be a JSON object");
    if (rc == 0) rc = check_members(o, detokenize, err);
    if (rc == 0) rc = detokenize ? parse_detokenize(o, vocab, out, err) : parse_tokenize(o, out, err);
    json_decref(o);
    if (rc) frt_api_tokens_clear(out);
    return rc;
}

/* A piece: its text when valid UTF-8 on its own, else its bytes. */
static json_t *piece_json(const char *t, size_t n)
{
    size_t clean_len = 0;
    char *clean = frt_utf8_sanitize(t, n, &clean_len);
    json_t *p;
    if (clean && clean_len == n && !memcmp(clean, t, n)) {
        p = json_stringn(t, n);
    } else {
        p = json_array();
        for (size_t i = 0; i < n; i++) json_array_append_new(p, json_integer((unsigned char)t[i]));
    }
    free(clean);
    return p;
}

static json_t *tokens_json(frt_engine *e, const int32_t *ids, size_t n, int with_pieces, frt_api_error *err)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        if (!with_pieces) {
            json_array_append_new(arr, json_integer(ids[i]));
            continue;
        }
        char *t = NULL;
        size_t tl = 0;
        int rc = e->detokenize(e->self, &ids[i], 1, &t, &tl);
        if (rc < 0) {
            json_decref(arr);
            frt_api_fail(err, 500, "internal_error", NULL, "detokenize: %s", frt_last_error());
            return NULL;
        }
        json_array_append_new(arr, json_pack("{s:i,s:o}", "id", (int)ids[i], "piece", piece_json(t, tl)));
        free(t);
    }
    return json_pack("{s:o}", "tokens", arr);
}

json_t *frt_api_tokens_answer(frt_engine *e, const frt_api_tokens *t, frt_api_error *err)
{
    if (t->detokenize) {
        char *text = NULL;
        size_t len = 0;
        int rc = e->detokenize(e->self, t->ids, t->n_ids, &text, &len);
        if (rc < 0) {
            int bad = rc == FRT_ERR_OUT_OF_RANGE;
            frt_api_fail(err, bad ? 400 : 500, bad ? "invalid_value" : "internal_error", "tokens", "detokenize: %s",
                         frt_last_error());
            return NULL;
        }
        size_t clean_len = 0;
        char *clean = frt_utf8_sanitize(text ? text : "", len, &clean_len);
        free(text);
        if (!clean) {
            frt_api_fail(err, 500, "out_of_memory", NULL, "out of memory");
            return NULL;
        }
        json_t *o = json_pack("{s:s%}", "content", clean, clean_len);
        free(clean);
        return o;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = e->tokenize(e->self, t->text, t->len, &ids, &n);
    if (rc < 0) {
        int bad = rc == FRT_ERR_INVALID_ARGUMENT;
        frt_api_fail(err, bad ? 400 : 500, bad ? "invalid_value" : "internal_error", "content", "tokenize: %s",
                     frt_last_error());
        return NULL;
    }
    json_t *o = tokens_json(e, ids, n, t->with_pieces, err);
    free(ids);
    return o;
}
