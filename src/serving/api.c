/*
 * serving/api.c - the OpenAI-compatible wire format, the request side (see
 * api.h and docs/serving.md): parsing and validation of every endpoint's
 * body, error objects, capsule and session ids. Answers: api_answers.c.
 */
#include "serving/api.h"

#include "frt/branch.h"

#include "util/error.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int frt_api_fail(frt_api_error *e, int status, const char *code, const char *param, const char *fmt, ...)
{
    e->status = status;
    e->type = status == 404 ? "not_found_error" : status >= 500 ? "server_error" : "invalid_request_error";
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

json_t *frt_api_error_json(const frt_api_error *e)
{
    json_t *o = json_object();
    json_object_set_new(o, "message", json_string(e->message));
    json_object_set_new(o, "type", json_string(e->type ? e->type : "server_error"));
    json_object_set_new(o, "param", e->param[0] ? json_string(e->param) : json_null());
    json_object_set_new(o, "code", e->code ? json_string(e->code) : json_null());
    json_t *w = json_object();
    json_object_set_new(w, "error", o);
    return w;
}

void frt_api_error_from_status(frt_api_error *e, int status, const char *what)
{
    const char *msg = frt_last_error();
    switch (status) {
    case FRT_ERR_NOT_FOUND: frt_api_fail(e, 404, "session_not_found", "session_id", "%s", msg); break;
    case FRT_ERR_OUT_OF_RANGE: frt_api_fail(e, 400, "context_length_exceeded", what, "%s", msg); break;
    case FRT_ERR_INVALID_ARGUMENT: frt_api_fail(e, 400, "invalid_value", what, "%s", msg); break;
    case FRT_ERR_UNSUPPORTED:
        frt_api_fail(e, 400, what && (!strcmp(what, "messages") || !strcmp(what, "tools")) ? "unsupported_chat_template"
                                                                                          : "unsupported_value",
                     what, "%s", msg);
        break;
    case FRT_ERR_STATE: frt_api_fail(e, 409, "conflict", NULL, "%s", msg); break;
    case FRT_ERR_OUT_OF_MEMORY: frt_api_fail(e, 507, "insufficient_storage", NULL, "%s", msg); break;
    default: frt_api_fail(e, 500, "internal_error", NULL, "%s (%s)", msg, frt_status_name(status)); break;
    }
}

/* ---- parsing ---------------------------------------------------------------------- */

json_t *frt_api_parse_object(const char *body, size_t len, frt_api_error *err)
{
    size_t i = 0;
    while (i < len && (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' || body[i] == '\t')) i++;
    if (i == len) return json_object();
    json_error_t je;
    /* a member given twice is refused: jansson would keep the last value and drop the first */
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
        frt_api_fail(err, 400, "invalid_json", NULL,
                     "We could not parse the JSON body of your request: %s (line %d, column %d)", je.text, je.line,
                     je.column);
        return NULL;
    }
    if (!json_is_object(o)) {
        json_decref(o);
        frt_api_fail(err, 400, "invalid_type", NULL, "The request body must be a JSON object");
        return NULL;
    }
    return o;
}

static int wrong_type(frt_api_error *err, const char *key, const char *want)
{
    return frt_api_fail(err, 400, "invalid_type", key, "Invalid type for '%s': expected %s", key, want);
}

int frt_api_opt_string(json_t *o, const char *key, const char **out, frt_api_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v)) return wrong_type(err, key, "a string");
    *out = json_string_value(v);
    return 0;
}

int frt_api_opt_bool(json_t *o, const char *key, int *out, frt_api_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return wrong_type(err, key, "a boolean");
    *out = json_is_true(v);
    return 0;
}

int frt_api_opt_int(json_t *o, const char *key, long long *out, int *present, frt_api_error *err)
{
    json_t *v = json_object_get(o, key);
    if (present) *present = 0;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v)) return wrong_type(err, key, "an integer");
    *out = json_integer_value(v);
    if (present) *present = 1;
    return 0;
}

/* An option the server would ignore is refused, never silently dropped. */
int frt_api_only_known(json_t *o, const char *const *known, const char *where, frt_api_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        int ok = 0;
        for (const char *const *k = known; *k && !ok; k++) ok = !strcmp(*k, key);
        if (!ok)
            return frt_api_fail(err, 400, "unsupported_parameter", key,
                                "Unsupported parameter '%.200s' in %s (the fields frt serve accepts: docs/serving.md)",
                                key, where);
    }
    return 0;
}

int frt_api_parse_no_body(const char *body, size_t len, const char *where, frt_api_error *err)
{
    json_t *o = frt_api_parse_object(body, len, err);
    if (!o) return -1;
    static const char *const none[] = {NULL};
    int rc = frt_api_only_known(o, none, where, err);
    json_decref(o);
    return rc;
}

static int opt_number(json_t *o, const char *key, double *out, frt_api_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return wrong_type(err, key, "a number");
    *out = json_number_value(v);
    return 0;
}

static char *dup_str(const char *s) { return strdup(s ? s : ""); }

static int parse_prompt(json_t *o, frt_api_completion *c, frt_api_error *err)
{
    json_t *p = json_object_get(o, "prompt");
    if (!p || json_is_null(p))
        return frt_api_fail(err, 400, "missing_required_parameter", "prompt", "Missing required parameter: 'prompt'");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
    if (json_is_string(p)) {
        if (!json_string_length(p)) return frt_api_fail(err, 400, "invalid_value", "prompt", "'prompt' must not be empty");
        c->prompt_text = dup_str(json_string_value(p));
        return c->prompt_text ? 0 : frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
    }
    if (!json_is_array(p))
        return wrong_type(err, "prompt", "a string, an array of one string, or an array of token ids");
    size_t n = json_array_size(p);
    if (n == 0) return frt_api_fail(err, 400, "invalid_value", "prompt", "'prompt' must not be empty");
    if (!(c->prompt_ids = malloc(n * sizeof *c->prompt_ids)))
        return frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(p, i);
        if (!json_is_integer(v)) {
            if (json_is_string(v) || json_is_array(v))
                return frt_api_fail(err, 400, "unsupported_value", "prompt",
                                    "Batched prompts are not supported: send one prompt per request");
            return wrong_type(err, "prompt", "an array of integer token ids");
        }
        json_int_t t = json_integer_value(v);
        if (t < 0 || t > INT32_MAX)
            return frt_api_fail(err, 400, "invalid_value", "prompt", "Token id %lld is out of range", (long long)t);
        c->prompt_ids[i] = (int32_t)t;
    }
    c->n_prompt_ids = (int)n;
    return 0;
}

/* stop: a string or up to 4. An empty string would match nowhere
 * (frt_stop_find skips it), so it is refused, naming the element. */
static int parse_stop(json_t *o, frt_api_completion *c, frt_api_error *err)
{
    json_t *s = json_object_get(o, "stop");
    if (!s || json_is_null(s)) return 0;
    if (json_is_string(s)) {
        if (!json_string_length(s)) return frt_api_fail(err, 400, "invalid_value", "stop", "'stop' must not be empty");
        c->stop = calloc(1, sizeof *c->stop);
        if (!c->stop || !(c->stop[0] = dup_str(json_string_value(s))))
            return frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
        c->n_stop = 1;
        return 0;
    }
    if (!json_is_array(s)) return wrong_type(err, "stop", "a string or an array of strings");
    size_t n = json_array_size(s);
    if (n > 4) return frt_api_fail(err, 400, "invalid_value", "stop", "'stop' takes at most 4 sequences");
    c->stop = calloc(n ? n : 1, sizeof *c->stop);
    if (!c->stop) return frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(s, i);
        if (!json_is_string(v)) return wrong_type(err, "stop", "a string or an array of strings");
        if (!json_string_length(v)) {
            char param[32];
            snprintf(param, sizeof param, "stop[%zu]", i);
            return frt_api_fail(err, 400, "invalid_value", param, "'%s' must not be empty", param);
        }
        if (!(c->stop[i] = dup_str(json_string_value(v)))) return frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
        c->n_stop = (int)i + 1;
    }
    return 0;
}

/* Every member of the OpenAI chat and completions request schemas that frt
 * serve does not implement, with the one value it honours (that value, or
 * null, is accepted; anything else is 400 unsupported_value naming the
 * member). docs/serving.md lists them all. */
typedef enum { D_NEVER, D_ZERO, D_ONE, D_INT_ONE, D_FALSE, D_FALSE_OR_ZERO, D_EMPTY, D_TIER, D_TEXT_ONLY } dflt;
typedef struct refused_field {
    const char *name;
    dflt ok;
    const char *why;
} refused_field;

static const refused_field k_refused[] = {
    {"echo", D_FALSE, "only false"},
    {"suffix", D_EMPTY, "only \"\" (no fill-in-the-middle)"},
    {"service_tier", D_TIER, "only \"auto\" or \"default\" (one tier)"},
    {"store", D_FALSE, "only false (completions are not stored)"},
    {"metadata", D_EMPTY, "only {} (completions are not stored)"},
    {"modalities", D_TEXT_ONLY, "only [\"text\"]"},
    {"audio", D_NEVER, "no audio output"},
    {"prediction", D_NEVER, "no predicted outputs"},
    {"reasoning_effort", D_NEVER, "use chat_template_kwargs (e.g. {\"enable_thinking\": false})"},
    {"verbosity", D_NEVER, "not implemented"},
    {"web_search_options", D_NEVER, "no web search"},
    {"prompt_cache_key", D_NEVER, "prefix reuse is automatic; use session_id"},
    {"functions", D_NEVER, "deprecated: use tools"},
    {"function_call", D_NEVER, "deprecated: use tool_choice"},
};

static int is_default(dflt ok, json_t *v)
{
    switch (ok) {
    case D_ZERO: return json_is_number(v) && json_number_value(v) == 0;
    case D_ONE: return json_is_number(v) && json_number_value(v) == 1;
    case D_INT_ONE: return json_is_integer(v) && json_integer_value(v) == 1;
    case D_FALSE: return json_is_false(v);
    case D_FALSE_OR_ZERO: return json_is_false(v) || (json_is_integer(v) && json_integer_value(v) == 0);
    case D_EMPTY:
        return (json_is_object(v) && !json_object_size(v)) || (json_is_string(v) && !json_string_length(v));
    case D_TIER:
        return json_is_string(v) && (!strcmp(json_string_value(v), "auto") || !strcmp(json_string_value(v), "default"));
    case D_TEXT_ONLY:
        return json_is_array(v) && json_array_size(v) == 1 && json_is_string(json_array_get(v, 0)) &&
               !strcmp(json_string_value(json_array_get(v, 0)), "text");
    default: return 0;
    }
}

static int refuse_unsupported(json_t *o, frt_api_error *err)
{
    for (size_t i = 0; i < sizeof k_refused / sizeof *k_refused; i++) {
        json_t *v = json_object_get(o, k_refused[i].name);
        if (v && !json_is_null(v) && !is_default(k_refused[i].ok, v))
            return frt_api_fail(err, 400, "unsupported_value", k_refused[i].name, "'%s' is not supported: %s",
                                k_refused[i].name, k_refused[i].why);
    }
    return 0;
}

#define FRT_API_COMMON_FIELDS                                                                                     \
    "model", "max_tokens", "temperature", "top_p", "top_k", "seed", "n", "stop", "stream", "stream_options",      \
        "ignore_eos", "session_id", "frt_pin_prefix", "logprobs", "top_logprobs", "user", "safety_identifier",    \
        "presence_penalty", "frequency_penalty", "repetition_penalty", "min_p", "logit_bias", "response_format", \
        "service_tier", "store", "metadata", "prompt_cache_key", "cartridge_id", "cartridge_label"
static const char *const completion_fields[] = {FRT_API_COMMON_FIELDS, "prompt", "echo", "best_of", "suffix", NULL};
static const char *const chat_fields[] = {
    FRT_API_COMMON_FIELDS, "messages", "max_completion_tokens", "tools", "tool_choice", "parallel_tool_calls",
    "chat_template_kwargs", "frt_return_prompt", "modalities", "audio", "prediction", "reasoning_effort", "verbosity",
    "web_search_options", "functions", "function_call", NULL};

/* max_tokens, and for chat its newer name max_completion_tokens: each >= 1;
 * both given must agree (neither is ignored). */
static int parse_max_tokens(json_t *o, int chat, frt_api_completion *c, frt_api_error *err)
{
    static const char *const names[] = {"max_tokens", "max_completion_tokens"};
    long long got[2] = {0, 0};
    int present[2] = {0, 0};
    for (int i = 0; i < 1 + chat; i++) {
        if (frt_api_opt_int(o, names[i], &got[i], &present[i], err)) return -1;
        if (present[i] && got[i] < 1)
            return frt_api_fail(err, 400, "invalid_value", names[i], "'%s' must be at least 1 (got %lld)", names[i],
                                got[i]);
    }
    if (present[0] && present[1] && got[0] != got[1])
        return frt_api_fail(err, 400, "invalid_value", "max_completion_tokens",
                            "'max_tokens' (%lld) and 'max_completion_tokens' (%lld) disagree: send one", got[0], got[1]);
    if (present[0] || present[1]) {
        long long v = present[0] ? got[0] : got[1];
        c->max_tokens = v > INT_MAX ? INT_MAX : (int)v;
        c->max_tokens_given = 1;
    }
    return 0;
}

/* presence_penalty, frequency_penalty ([-2, 2], OpenAI), repetition_penalty
 * (> 0, vLLM; 1 = off), min_p ([0, 1]): include/frt/sampling.h applies them
 * inside the sampling step. */
static int parse_penalties(json_t *o, frt_sampling *s, frt_api_error *err)
{
    double pres = 0, freq = 0, rep = 1, min_p = 0;
    if (opt_number(o, "presence_penalty", &pres, err) || opt_number(o, "frequency_penalty", &freq, err) ||
        opt_number(o, "repetition_penalty", &rep, err) || opt_number(o, "min_p", &min_p, err))
        return -1;
    if (!(pres >= -2 && pres <= 2))
        return frt_api_fail(err, 400, "invalid_value", "presence_penalty", "'presence_penalty' must be in [-2, 2]");
    if (!(freq >= -2 && freq <= 2))
        return frt_api_fail(err, 400, "invalid_value", "frequency_penalty", "'frequency_penalty' must be in [-2, 2]");
    if (!(rep > 0 && rep <= 1e6))
        return frt_api_fail(err, 400, "invalid_value", "repetition_penalty",
                            "'repetition_penalty' must be > 0 (1 = off)");
    if (!(min_p >= 0 && min_p <= 1))
        return frt_api_fail(err, 400, "invalid_value", "min_p", "'min_p' must be in [0, 1]");
    s->presence_penalty = (float)pres;
    s->frequency_penalty = (float)freq;
    s->repetition_penalty = rep == 1 ? 0.0f : (float)rep;
    s->min_p = (float)min_p;
    return 0;
}

/* logit_bias: {"token id": bias}, ids decimal and >= 0 (the vocabulary
 * bound is checked when the request runs), bias in [-100, 100], at most
 * FRT_SAMPLING_MAX_BIAS entries (OpenAI's shape and limits). */
static int parse_logit_bias(json_t *o, frt_sampling *s, frt_api_error *err)
{
    json_t *lb = json_object_get(o, "logit_bias");
    if (!lb || json_is_null(lb)) return 0;
    if (!json_is_object(lb)) return wrong_type(err, "logit_bias", "an object of token id -> bias");
    if (json_object_size(lb) > FRT_SAMPLING_MAX_BIAS)
        return frt_api_fail(err, 400, "invalid_value", "logit_bias", "'logit_bias' takes at most %d entries",
                            FRT_SAMPLING_MAX_BIAS);
    const char *key;
    json_t *v;
    int n = 0;
    json_object_foreach(lb, key, v) {
        char *end = NULL;
        errno = 0;
        long id = strtol(key, &end, 10);
        if (!*key || *end || errno || id < 0 || id > INT32_MAX || key[0] == '+' || key[0] == '-' || key[0] == ' ')
            return frt_api_fail(err, 400, "invalid_value", "logit_bias", "'logit_bias' key '%.40s' is not a token id",
                                key);
        if (!json_is_number(v) || !(json_number_value(v) >= -100 && json_number_value(v) <= 100))
            return frt_api_fail(err, 400, "invalid_value", "logit_bias",
                                "'logit_bias' value of token %ld must be a number in [-100, 100]", id);
        for (int i = 0; i < n; i++)
            if (s->logit_bias[i].token == (int32_t)id)
                return frt_api_fail(err, 400, "invalid_value", "logit_bias", "'logit_bias' names token %ld twice",
                                    id);
        s->logit_bias[n].token = (int32_t)id;
        s->logit_bias[n].bias = (float)json_number_value(v);
        n++;
    }
    s->n_logit_bias = n;
    return 0;
}

/* n (1..FRT_MAX_BRANCH_SLOTS) and, for completions, best_of (n..that
 * limit; refused with stream, as OpenAI). Whether the server has that many
 * branch slots is the service's check. Call after stream is parsed. */
static int parse_choices(json_t *o, frt_api_completion *c, frt_api_error *err)
{
    static const char *const names[] = {"n", "best_of"};
    long long v[2] = {1, 0};
    for (int i = 0; i < 2; i++) {
        int present = 0;
        json_t *x = json_object_get(o, names[i]);
        if (!x || json_is_null(x)) continue;
        if (frt_api_opt_int(o, names[i], &v[i], &present, err)) return -1;
        if (v[i] < 1 || v[i] > FRT_MAX_BRANCH_SLOTS)
            return frt_api_fail(err, 400, "invalid_value", names[i], "'%s' must be 1..%d (got %lld)", names[i],
                                FRT_MAX_BRANCH_SLOTS, v[i]);
    }
    if (!v[1]) v[1] = v[0];
    if (v[1] < v[0])
        return frt_api_fail(err, 400, "invalid_value", "best_of", "'best_of' (%lld) must be at least 'n' (%lld)",
                            v[1], v[0]);
    if (c->stream && v[1] > v[0])
        return frt_api_fail(err, 400, "unsupported_value", "best_of",
                            "'best_of' above 'n' cannot be streamed (the best choices are known at the end)");
    c->n = (int)v[0];
    c->best_of = (int)v[1];
    return 0;
}

static int parse_logprobs(json_t *o, int chat, frt_api_completion *c, frt_api_error *err);

static int parse_fields(json_t *o, int chat, int default_max_tokens, frt_api_completion *c, frt_api_error *err)
{
    if (frt_api_only_known(o, chat ? chat_fields : completion_fields, "a completion request", err)) return -1;
    if (refuse_unsupported(o, err)) return -1;
    const char *model = NULL, *user = NULL, *safety = NULL;
    if (frt_api_opt_string(o, "user", &user, err) || frt_api_opt_string(o, "safety_identifier", &safety, err))
        return -1;
    /* both are shown in the request log, the only use the server has for them */
    snprintf(c->user, sizeof c->user, "%.40s%s%.20s", user ? user : "", user && safety ? "/" : "", safety ? safety : "");
    if (frt_api_opt_string(o, "model", &model, err)) return -1;
    snprintf(c->model, sizeof c->model, "%s", model ? model : "");
    if (chat ? frt_api_parse_chat(o, c, err) : parse_prompt(o, c, err)) return -1;
    if (frt_api_parse_grammar(o, c, err)) return -1;

    long long v = 0;
    int present = 0;
    c->max_tokens = default_max_tokens;
    if (parse_max_tokens(o, chat, c, err)) return -1;
    double t = 1.0, top_p = 1.0;
    if (opt_number(o, "temperature", &t, err) || opt_number(o, "top_p", &top_p, err)) return -1;
    if (!(t >= 0 && t <= 2))
        return frt_api_fail(err, 400, "invalid_value", "temperature", "'temperature' must be in [0, 2]");
    if (!(top_p > 0 && top_p <= 1))
        return frt_api_fail(err, 400, "invalid_value", "top_p", "'top_p' must be in (0, 1]");
    c->sampling.temperature = (float)t;
    c->sampling.top_p = (float)top_p;
    if (frt_api_opt_int(o, "top_k", &v, &present, err)) return -1;
    if (present && v < 0) return frt_api_fail(err, 400, "invalid_value", "top_k", "'top_k' must be >= 0");
    c->sampling.top_k = present ? (int)(v > INT_MAX ? INT_MAX : v) : 0;
    if (parse_penalties(o, &c->sampling, err) || parse_logit_bias(o, &c->sampling, err) ||
        parse_logprobs(o, chat, c, err))
        return -1;
    if (frt_api_opt_int(o, "seed", &v, &present, err)) return -1;
    c->has_seed = present;
    c->seed = (uint64_t)v;
    if (parse_stop(o, c, err)) return -1;
    if (frt_api_opt_bool(o, "stream", &c->stream, err) || frt_api_opt_bool(o, "ignore_eos", &c->ignore_eos, err))
        return -1;
    json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        /* only the streaming path reads it (OpenAI refuses it without stream too) */
        if (!c->stream)
            return frt_api_fail(err, 400, "invalid_value", "stream_options",
                                "'stream_options' is only allowed when 'stream' is true");
        if (!json_is_object(so)) return wrong_type(err, "stream_options", "an object");
        static const char *const so_fields[] = {"include_usage", "include_obfuscation", NULL};
        if (frt_api_only_known(so, so_fields, "stream_options", err)) return -1;
        if (frt_api_opt_bool(so, "include_usage", &c->include_usage, err)) return -1;
        if (json_is_true(json_object_get(so, "include_obfuscation")))
            return frt_api_fail(err, 400, "unsupported_value", "stream_options.include_obfuscation",
                                "'include_obfuscation' is not supported (only false)");
    }
    if (parse_choices(o, c, err)) return -1;
    const char *sid = NULL;
    if (frt_api_opt_string(o, "session_id", &sid, err)) return -1;
    if (sid) {
        if (!frt_session_id_valid(sid))
            return frt_api_fail(err, 400, "invalid_value", "session_id", "'session_id' is not a valid session id");
        if (!(c->session_id = dup_str(sid))) return frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
    }
    if (frt_api_parse_cartridge(o, c, err)) return -1;
    json_t *pin = json_object_get(o, "frt_pin_prefix");
    if (pin && !json_is_null(pin)) {
        if (json_is_boolean(pin)) {
            c->pin_len = json_is_true(pin) ? -1 : 0;
        } else if (json_is_integer(pin)) {
            json_int_t pl = json_integer_value(pin);
            if (pl < 0)
                return frt_api_fail(err, 400, "invalid_value", "frt_pin_prefix", "'frt_pin_prefix' must be >= 0");
            c->pin_len = pl > INT_MAX ? INT_MAX : (int)pl;
        } else {
            return wrong_type(err, "frt_pin_prefix", "a boolean or a token count");
        }
    }
    return 0;
}

int frt_api_parse_completion(const char *body, size_t len, int chat, int default_max_tokens,
                             frt_api_completion *out, frt_api_error *err)
{
    memset(out, 0, sizeof *out);
    out->chat = chat;
    json_t *o = frt_api_parse_object(body, len, err);
    if (!o) return -1;
    int rc = parse_fields(o, chat, default_max_tokens, out, err);
    json_decref(o);
    if (rc) frt_api_completion_clear(out);
    out->chat = chat;
    return rc;
}

void frt_api_completion_clear(frt_api_completion *c)
{
    if (!c) return;
    free(c->prompt_text);
    free(c->prompt_ids);
    json_decref(c->messages);
    json_decref(c->tools);
    json_decref(c->template_kwargs);
    frt_grammar_free(c->grammar);
    for (int i = 0; i < c->n_stop; i++) free(c->stop[i]);
    free(c->stop);
    free(c->session_id);
    memset(c, 0, sizeof *c);
}

/* Chat: logprobs (boolean) and top_logprobs (0..20, needs logprobs: true).
 * Completions: logprobs N in 0..5 (the sampled token's logprob and the N
 * most likely; false = off); top_logprobs is a chat member (0 accepted, it
 * asks for nothing). Both set
 * c->sampling.logprobs / top_logprobs (frt/sampling.h). */
static int parse_logprobs(json_t *o, int chat, frt_api_completion *c, frt_api_error *err)
{
    json_t *lp = json_object_get(o, "logprobs");
    long long top = 0;
    int has_top = 0;
    if (!chat) {
        json_t *t = json_object_get(o, "top_logprobs");
        if (t && !json_is_null(t) && !(json_is_integer(t) && json_integer_value(t) == 0))
            return frt_api_fail(err, 400, "unsupported_value", "top_logprobs",
                                "'top_logprobs' is a chat member (only 0 here): completions take 'logprobs': N");
        if (!lp || json_is_null(lp) || json_is_false(lp)) return 0;
        if (!json_is_integer(lp)) return wrong_type(err, "logprobs", "an integer in [0, 5]");
        json_int_t n = json_integer_value(lp);
        if (n < 0 || n > 5) return frt_api_fail(err, 400, "invalid_value", "logprobs", "'logprobs' must be in [0, 5]");
        c->sampling.logprobs = 1;
        c->sampling.top_logprobs = (int)n;
        return 0;
    }
    int on = 0;
    if (frt_api_opt_bool(o, "logprobs", &on, err) || frt_api_opt_int(o, "top_logprobs", &top, &has_top, err)) return -1;
    if (has_top && (top < 0 || top > FRT_SAMPLING_MAX_TOP_LOGPROBS))
        return frt_api_fail(err, 400, "invalid_value", "top_logprobs", "'top_logprobs' must be in [0, %d]",
                            FRT_SAMPLING_MAX_TOP_LOGPROBS);
    if (has_top && top > 0 && !on)
        return frt_api_fail(err, 400, "invalid_value", "top_logprobs", "'top_logprobs' needs 'logprobs': true");
    c->sampling.logprobs = on;
    c->sampling.top_logprobs = on ? (int)top : 0;
    return 0;
}

/* ---- session endpoints --------------------------------------------------------------- */

static int id_param(const char *s, const char *param, frt_api_error *err)
{
    if (frt_session_id_valid(s)) return 0;
    return frt_api_fail(err, 400, "invalid_value", param,
                        "'%s' must be 1 to %d characters of letters, digits, '.', '_', '-', ':'", param,
                        FRT_SESSION_ID_MAX - 1);
}

int frt_api_parse_session_create(const char *body, size_t len, frt_api_session_create *out, frt_api_error *err)
{
    memset(out, 0, sizeof *out);
    json_t *o = frt_api_parse_object(body, len, err);
    if (!o) return -1;
    static const char *const fields[] = {"id", "salt", "pin", NULL};
    const char *id = NULL, *salt = NULL;
    int bad = frt_api_only_known(o, fields, "a session", err) || frt_api_opt_string(o, "id", &id, err) ||
              frt_api_opt_string(o, "salt", &salt, err) || frt_api_opt_bool(o, "pin", &out->pin, err) ||
              (id && id_param(id, "id", err));
    int rc = bad ? -1 : 0;
    if (!rc && id) {
        snprintf(out->id, sizeof out->id, "%s", id);
        out->has_id = 1;
    }
    if (!rc && salt && *salt) {
        out->salt_len = strlen(salt);
        if (!(out->salt = strdup(salt))) rc = frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
    }
    json_decref(o);
    if (rc) frt_api_session_create_clear(out);
    return rc;
}

void frt_api_session_create_clear(frt_api_session_create *c)
{
    if (!c) return;
    free(c->salt);
    memset(c, 0, sizeof *c);
}

int frt_api_parse_session_op(const char *body, size_t len, frt_api_session_verb verb, frt_api_session_op *out,
                             frt_api_error *err)
{
    memset(out, 0, sizeof *out);
    out->n = 1;
    out->pin = 1;
    json_t *o = frt_api_parse_object(body, len, err);
    if (!o) return -1;
    static const char *const fork_fields[] = {"n", NULL}, *const ckpt_fields[] = {"name", "pin", NULL},
                             *const rb_fields[] = {"name", "checkpoint", NULL};
    const char *const *known = verb == FRT_API_FORK ? fork_fields : verb == FRT_API_CHECKPOINT ? ckpt_fields : rb_fields;
    int rc = frt_api_only_known(o, known, "a session operation", err);
    if (!rc && verb == FRT_API_FORK) {
        long long n = 1;
        int present = 0;
        if (frt_api_opt_int(o, "n", &n, &present, err)) rc = -1;
        else if (n < 1 || n > 64) rc = frt_api_fail(err, 400, "invalid_value", "n", "'n' must be 1..64");
        else out->n = (int)n;
    } else if (!rc) {
        /* rollback takes "checkpoint" as another name for "name": one of them, never both */
        const char *name = NULL, *alias = NULL;
        int ckpt = verb == FRT_API_CHECKPOINT;
        if (frt_api_opt_string(o, "name", &name, err)) rc = -1;
        else if (!ckpt && frt_api_opt_string(o, "checkpoint", &alias, err)) rc = -1;
        else if (name && alias)
            rc = frt_api_fail(err, 400, "invalid_value", "checkpoint",
                              "'name' and 'checkpoint' both name the checkpoint to roll back to: send one");
        else if (ckpt && frt_api_opt_bool(o, "pin", &out->pin, err)) rc = -1;
        else if (!name && !alias)
            rc = frt_api_fail(err, 400, "missing_required_parameter", "name", "Missing required parameter: 'name'");
        else if (id_param(name ? name : alias, name ? "name" : "checkpoint", err)) rc = -1;
        else snprintf(out->name, sizeof out->name, "%s", name ? name : alias);
    }
    json_decref(o);
    return rc;
}

int frt_api_check_url_id(const char *s, const char *param, frt_api_error *err)
{
    return id_param(s, param, err);
}
