/*
 * serving/api.c - the OpenAI-compatible wire format (see api.h and
 * docs/serving.md): request validation, response objects, stream chunks,
 * error objects, listings.
 */
#include "serving/api.h"

#include "util/error.h"

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
    case FRT_ERR_UNSUPPORTED: frt_api_fail(e, 400, "unsupported_chat_template", what, "%s", msg); break;
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
    json_t *o = json_loadb(body, len, 0, &je);
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

static int opt_number(json_t *o, const char *key, double *out, frt_api_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return wrong_type(err, key, "a number");
    *out = json_number_value(v);
    return 0;
}

static char *dup_str(const char *s)
{
    char *d = strdup(s ? s : "");
    return d;
}

/* Chat content: a string, or an array of {"type": "text", "text": ...} parts. */
static int content_text(json_t *content, int i, char **out, frt_api_error *err)
{
    char param[64];
    snprintf(param, sizeof param, "messages[%d].content", i);
    if (!content || json_is_null(content)) {
        *out = dup_str("");
        return 0;
    }
    if (json_is_string(content)) {
        *out = dup_str(json_string_value(content));
        return 0;
    }
    if (!json_is_array(content)) return wrong_type(err, param, "a string or an array of text parts");
    size_t total = 1, k;
    json_t *part;
    json_array_foreach(content, k, part) {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") ||
            !json_is_string(text))
            return frt_api_fail(err, 400, "invalid_value", param, "Only text content parts are supported in '%s'",
                                param);
        total += strlen(json_string_value(text));
    }
    char *s = malloc(total), *p = s;
    if (!s) return frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
    json_array_foreach(content, k, part) {
        const char *t = json_string_value(json_object_get(part, "text"));
        size_t l = strlen(t);
        memcpy(p, t, l);
        p += l;
    }
    *p = 0;
    *out = s;
    return 0;
}

static int parse_messages(json_t *o, frt_api_completion *c, frt_api_error *err)
{
    json_t *m = json_object_get(o, "messages");
    if (!m || json_is_null(m))
        return frt_api_fail(err, 400, "missing_required_parameter", "messages",
                            "Missing required parameter: 'messages'");
    if (!json_is_array(m)) return wrong_type(err, "messages", "an array");
    size_t n = json_array_size(m);
    if (n == 0) return frt_api_fail(err, 400, "invalid_value", "messages", "'messages' must not be empty");
    if (!(c->msgs = calloc(n, sizeof *c->msgs))) return frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(m, i);
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(x)) return wrong_type(err, param, "an object");
        json_t *role = json_object_get(x, "role");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!role) return frt_api_fail(err, 400, "missing_required_parameter", param, "Missing '%s'", param);
        if (!json_is_string(role) || !json_string_length(role)) return wrong_type(err, param, "a non-empty string");
        char *content = NULL;
        if (content_text(json_object_get(x, "content"), (int)i, &content, err)) return -1;
        c->msgs[i].role = dup_str(json_string_value(role));
        c->msgs[i].content = content;
        c->n_msgs = (int)i + 1;
        if (!c->msgs[i].role || !c->msgs[i].content) return frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
    }
    return 0;
}

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

static int parse_stop(json_t *o, frt_api_completion *c, frt_api_error *err)
{
    json_t *s = json_object_get(o, "stop");
    if (!s || json_is_null(s)) return 0;
    if (json_is_string(s)) {
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
        if (!(c->stop[i] = dup_str(json_string_value(v)))) return frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
        c->n_stop = (int)i + 1;
    }
    return 0;
}

static int parse_fields(json_t *o, int chat, int default_max_tokens, frt_api_completion *c, frt_api_error *err)
{
    const char *model = NULL;
    if (frt_api_opt_string(o, "model", &model, err)) return -1;
    snprintf(c->model, sizeof c->model, "%s", model ? model : "");
    if (chat ? parse_messages(o, c, err) : parse_prompt(o, c, err)) return -1;

    long long v = 0;
    int present = 0;
    c->max_tokens = default_max_tokens;
    if (frt_api_opt_int(o, "max_tokens", &v, &present, err)) return -1;
    if (!present && chat && frt_api_opt_int(o, "max_completion_tokens", &v, &present, err)) return -1;
    if (present) {
        if (v < 1)
            return frt_api_fail(err, 400, "invalid_value", "max_tokens", "'max_tokens' must be at least 1 (got %lld)", v);
        c->max_tokens = v > INT_MAX ? INT_MAX : (int)v;
    }
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
    if (frt_api_opt_int(o, "seed", &v, &present, err)) return -1;
    c->has_seed = present;
    c->seed = (uint64_t)v;
    if (frt_api_opt_int(o, "n", &v, &present, err)) return -1;
    if (present && v != 1)
        return frt_api_fail(err, 400, "unsupported_value", "n",
                            "Only n = 1 is supported; fork a session (POST /v1/sessions/{id}/fork) for branches");
    if (parse_stop(o, c, err)) return -1;
    if (frt_api_opt_bool(o, "stream", &c->stream, err) || frt_api_opt_bool(o, "ignore_eos", &c->ignore_eos, err))
        return -1;
    json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) return wrong_type(err, "stream_options", "an object");
        if (frt_api_opt_bool(so, "include_usage", &c->include_usage, err)) return -1;
    }
    const char *sid = NULL;
    if (frt_api_opt_string(o, "session_id", &sid, err)) return -1;
    if (sid) {
        if (!frt_session_id_valid(sid))
            return frt_api_fail(err, 400, "invalid_value", "session_id", "'session_id' is not a valid session id");
        if (!(c->session_id = dup_str(sid))) return frt_api_fail(err, 500, "internal_error", NULL, "out of memory");
    }
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
    json_t *lp = json_object_get(o, "logprobs");
    if (lp && !json_is_null(lp) && !json_is_false(lp) && !(json_is_integer(lp) && json_integer_value(lp) == 0))
        return frt_api_fail(err, 400, "unsupported_value", "logprobs", "'logprobs' is not supported");
    json_t *echo = json_object_get(o, "echo");
    if (echo && json_is_true(echo)) return frt_api_fail(err, 400, "unsupported_value", "echo", "'echo' is not supported");
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
    for (int i = 0; i < c->n_msgs; i++) {
        free((char *)c->msgs[i].role);
        free((char *)c->msgs[i].content);
    }
    free(c->msgs);
    for (int i = 0; i < c->n_stop; i++) free(c->stop[i]);
    free(c->stop);
    free(c->session_id);
    memset(c, 0, sizeof *c);
}

/* ---- responses ------------------------------------------------------------------------ */

void frt_api_capsule_name(uint64_t id, char out[32]) { snprintf(out, 32, "cap-%llu", (unsigned long long)id); }

uint64_t frt_api_capsule_id(const char *s)
{
    if (!s || strncmp(s, "cap-", 4) || !s[4]) return 0;
    char *end = NULL;
    unsigned long long v = strtoull(s + 4, &end, 10);
    return end && !*end && s[4] >= '0' && s[4] <= '9' ? (uint64_t)v : 0;
}

static json_t *cap_or_null(uint64_t id)
{
    if (!id) return json_null();
    char n[32];
    frt_api_capsule_name(id, n);
    return json_string(n);
}

static json_t *ms(double v) { return json_real(round(v * 1000.0) / 1000.0); }

json_t *frt_api_frt_json(const frt_gen_result *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "prefix_action", json_string(frt_prefix_action_name(r->action)));
    json_object_set_new(o, "cached_tokens", json_integer(r->cached_tokens));
    json_object_set_new(o, "prefill_tokens", json_integer(r->prefill_tokens));
    json_object_set_new(o, "restore_ms", ms(r->restore_ms));
    json_object_set_new(o, "prefill_ms", ms(r->prefill_ms));
    json_object_set_new(o, "ttft_ms", ms(r->ttft_ms));
    json_object_set_new(o, "total_ms", ms(r->total_ms));
    json_object_set_new(o, "restored_capsule", cap_or_null(r->restored));
    json_object_set_new(o, "pinned_capsule", cap_or_null(r->pinned));
    if (r->pin_unavailable) json_object_set_new(o, "pin_unavailable", json_true());
    json_object_set_new(o, "position", json_integer(r->position));
    json_object_set_new(o, "session_id", r->session_id[0] ? json_string(r->session_id) : json_null());
    json_t *t = json_array();
    for (int i = 0; i < r->n_tokens; i++) json_array_append_new(t, json_integer(r->tokens[i]));
    json_object_set_new(o, "tokens", t);
    return o;
}

static json_t *usage_json(const frt_gen_result *r)
{
    json_t *u = json_object();
    json_object_set_new(u, "prompt_tokens", json_integer(r->prompt_tokens));
    json_object_set_new(u, "completion_tokens", json_integer(r->completion_tokens));
    json_object_set_new(u, "total_tokens", json_integer(r->prompt_tokens + r->completion_tokens));
    json_t *d = json_object();
    json_object_set_new(d, "cached_tokens", json_integer(r->cached_tokens));
    json_object_set_new(u, "prompt_tokens_details", d);
    return u;
}

static json_t *head_json(const frt_api_ident *id, int chunk)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(id->id));
    json_object_set_new(o, "object", json_string(id->chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                          : "text_completion"));
    json_object_set_new(o, "created", json_integer(id->created));
    json_object_set_new(o, "model", json_string(id->model));
    json_object_set_new(o, "system_fingerprint", json_null());
    return o;
}

json_t *frt_api_completion_json(const frt_api_ident *id, const frt_gen_result *res)
{
    json_t *o = head_json(id, 0), *ch = json_object(), *choices = json_array();
    json_object_set_new(ch, "index", json_integer(0));
    json_t *text = json_stringn(res->text ? res->text : "", res->text_len);
    if (id->chat) {
        json_t *m = json_object();
        json_object_set_new(m, "role", json_string("assistant"));
        json_object_set_new(m, "content", text);
        json_object_set_new(ch, "message", m);
    } else {
        json_object_set_new(ch, "text", text);
    }
    json_object_set_new(ch, "logprobs", json_null());
    json_object_set_new(ch, "finish_reason", json_string(res->finish_reason ? res->finish_reason : "stop"));
    json_array_append_new(choices, ch);
    json_object_set_new(o, "choices", choices);
    json_object_set_new(o, "usage", usage_json(res));
    if (res->session_id[0]) json_object_set_new(o, "session_id", json_string(res->session_id));
    json_object_set_new(o, "frt", frt_api_frt_json(res));
    return o;
}

json_t *frt_api_chunk_json(const frt_api_ident *id, const char *text, size_t len, int role, const char *finish,
                           const frt_gen_result *res)
{
    json_t *o = head_json(id, 1), *ch = json_object(), *choices = json_array();
    json_object_set_new(ch, "index", json_integer(0));
    if (id->chat) {
        json_t *d = json_object();
        if (role) json_object_set_new(d, "role", json_string("assistant"));
        if (!finish) json_object_set_new(d, "content", json_stringn(text ? text : "", text ? len : 0));
        json_object_set_new(ch, "delta", d);
    } else {
        json_object_set_new(ch, "text", json_stringn(text ? text : "", text ? len : 0));
    }
    json_object_set_new(ch, "logprobs", json_null());
    json_object_set_new(ch, "finish_reason", finish ? json_string(finish) : json_null());
    json_array_append_new(choices, ch);
    json_object_set_new(o, "choices", choices);
    if (finish && res) {
        json_object_set_new(o, "usage", usage_json(res));
        if (res->session_id[0]) json_object_set_new(o, "session_id", json_string(res->session_id));
        json_object_set_new(o, "frt", frt_api_frt_json(res));
    }
    return o;
}

json_t *frt_api_usage_chunk_json(const frt_api_ident *id, const frt_gen_result *res)
{
    json_t *o = head_json(id, 1);
    json_object_set_new(o, "choices", json_array());
    json_object_set_new(o, "usage", usage_json(res));
    return o;
}

/* ---- listings -------------------------------------------------------------------------- */

json_t *frt_api_capsule_json(const frt_service *s, const frt_cap *c)
{
    json_t *o = json_object();
    char n[32];
    frt_api_capsule_name(c->id, n);
    json_object_set_new(o, "id", json_string(n));
    json_object_set_new(o, "object", json_string("capsule"));
    json_object_set_new(o, "kind", json_string(frt_cap_kind_name(c->kind)));
    json_object_set_new(o, "tier", json_string(frt_engine_tier_name(c->tier)));
    json_object_set_new(o, "bytes", json_integer((json_int_t)c->bytes));
    json_object_set_new(o, "position", json_integer(c->position));
    json_object_set_new(o, "pending", c->pending >= 0 ? json_integer(c->pending) : json_null());
    json_object_set_new(o, "exact", json_boolean(c->exact));
    json_object_set_new(o, "pinned", json_boolean(frt_cap_pinned(c)));
    json_object_set_new(o, "pin_manual", json_boolean(c->pin_manual));
    json_object_set_new(o, "refs", json_integer(c->refs));
    json_object_set_new(o, "persisted", json_boolean(c->persisted));
    json_object_set_new(o, "loaded", json_boolean(c->handle != NULL));
    json_object_set_new(o, "salted", json_boolean(c->salt_hash != 0));
    json_object_set_new(o, "owner", c->owner[0] ? json_string(c->owner) : json_null());
    json_object_set_new(o, "name", c->name[0] ? json_string(c->name) : json_null());
    json_object_set_new(o, "last_used", json_integer((json_int_t)c->last_used));
    return o;
}

json_t *frt_api_capsules_json(const frt_service *s)
{
    const frt_registry *r = frt_service_registry(s);
    json_t *data = json_array();
    for (int i = 0; i < frt_registry_count(r); i++) json_array_append_new(data, frt_api_capsule_json(s, frt_registry_at(r, i)));
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    json_t *tiers = json_object();
    for (int t = 0; t < FRT_ENGINE_N_TIERS; t++) {
        json_t *x = json_object();
        json_object_set_new(x, "bytes", json_integer((json_int_t)frt_registry_bytes(r, t)));
        json_object_set_new(x, "budget", json_integer((json_int_t)frt_registry_budget(r, t)));
        json_object_set_new(x, "count", json_integer(frt_registry_tier_count(r, t)));
        json_object_set_new(tiers, frt_engine_tier_name(t), x);
    }
    json_object_set_new(o, "tiers", tiers);
    return o;
}

json_t *frt_api_session_json(const frt_service *s, const frt_session *x)
{
    const frt_registry *r = frt_service_registry(s);
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(x->id));
    json_object_set_new(o, "object", json_string("session"));
    json_object_set_new(o, "created", json_integer((json_int_t)x->created));
    json_object_set_new(o, "position", json_integer(x->n));
    json_object_set_new(o, "pending", x->pending >= 0 ? json_integer(x->pending) : json_null());
    json_object_set_new(o, "pinned", json_boolean(x->pinned));
    json_object_set_new(o, "salted", json_boolean(x->salt_len > 0));
    json_object_set_new(o, "hot", json_boolean(frt_service_hot(s) == x));
    json_object_set_new(o, "busy", json_boolean(x->busy));
    json_object_set_new(o, "requests", json_integer((json_int_t)x->requests));
    const frt_cap *c = frt_registry_get(r, x->capsule);
    json_object_set_new(o, "capsule", c ? cap_or_null(c->id) : json_null());
    json_object_set_new(o, "capsule_tier", c ? json_string(frt_engine_tier_name(c->tier)) : json_null());
    json_t *ck = json_array();
    for (int i = 0; i < x->n_ckpts; i++) {
        const frt_cap *k = frt_registry_get(r, x->ckpts[i].capsule);
        json_t *e = json_object();
        json_object_set_new(e, "name", json_string(x->ckpts[i].name));
        json_object_set_new(e, "capsule", k ? cap_or_null(k->id) : json_null());
        json_object_set_new(e, "position", k ? json_integer(k->position) : json_null());
        json_object_set_new(e, "pinned", json_boolean(x->ckpts[i].pin));
        json_array_append_new(ck, e);
    }
    json_object_set_new(o, "checkpoints", ck);
    return o;
}

json_t *frt_api_sessions_json(const frt_service *s)
{
    const frt_sessions *t = frt_service_sessions(s);
    json_t *data = json_array();
    for (int i = 0; i < t->n; i++) json_array_append_new(data, frt_api_session_json(s, t->v[i]));
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    return o;
}

/* ---- metrics ----------------------------------------------------------------------------- */

char *frt_api_metrics_text(const frt_service *s, const frt_http_stats *h)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    frt_service_metrics m;
    frt_service_metrics_get(s, &m);
    const frt_registry *r = frt_service_registry(s);
    frt_registry_stats st;
    frt_registry_stats_get(r, &st);

    fprintf(f, "# HELP frt_requests_total Completions served, by prefix action.\n# TYPE frt_requests_total counter\n");
    for (int a = 0; a < 3; a++)
        fprintf(f, "frt_requests_total{prefix_action=\"%s\"} %llu\n", frt_prefix_action_name((frt_prefix_action)a),
                (unsigned long long)m.requests[a]);
    fprintf(f, "# HELP frt_requests_cancelled_total Completions cancelled by their client.\n"
               "# TYPE frt_requests_cancelled_total counter\nfrt_requests_cancelled_total %llu\n",
            (unsigned long long)m.cancelled);
    fprintf(f, "# HELP frt_requests_failed_total Completions that failed after validation.\n"
               "# TYPE frt_requests_failed_total counter\nfrt_requests_failed_total %llu\n",
            (unsigned long long)m.failed);
    fprintf(f, "# HELP frt_ttft_seconds Time to first token, from arrival to the first sampled token.\n"
               "# TYPE frt_ttft_seconds histogram\n");
    for (int b = 0; b < FRT_TTFT_BUCKETS; b++) {
        if (b == FRT_TTFT_BUCKETS - 1) fprintf(f, "frt_ttft_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)m.ttft_count[b]);
        else fprintf(f, "frt_ttft_seconds_bucket{le=\"%g\"} %llu\n", frt_ttft_bounds[b], (unsigned long long)m.ttft_count[b]);
    }
    fprintf(f, "frt_ttft_seconds_sum %.6f\nfrt_ttft_seconds_count %llu\n", m.ttft_sum,
            (unsigned long long)m.ttft_count[FRT_TTFT_BUCKETS - 1]);
    const struct {
        const char *name, *help;
        uint64_t v;
    } counters[] = {
        {"frt_prompt_tokens_total", "Prompt tokens of served completions.", m.prompt_tokens},
        {"frt_cached_tokens_total", "Prompt tokens reused from the live state or a capsule.", m.cached_tokens},
        {"frt_prefill_tokens_total", "Prompt tokens prefilled.", m.prefill_tokens},
        {"frt_generated_tokens_total", "Generated tokens.", m.generated_tokens},
        {"frt_session_displacements_total", "Hot sessions snapshotted when another took the live state.", m.displacements},
        {"frt_capsule_snapshots_total", "Capsules snapshotted into the registry.", st.snapshots},
        {"frt_capsule_snapshot_failures_total", "Snapshots that found no room in any tier.", m.snapshot_failures},
        {"frt_capsule_restore_failures_total", "Restores that failed (the request rebuilt instead).", m.restore_failures},
        {"frt_capsule_demotions_total", "Capsules moved one tier down by the budgets.", st.demotions},
        {"frt_capsule_promotions_total", "Capsules moved up on restore.", st.promotions},
        {"frt_capsule_evictions_total", "Capsules deleted by the budgets.", st.evictions},
        {"frt_capsule_load_failures_total", "Capsule files that failed their checks.", st.load_failures},
    };
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
        fprintf(f, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", counters[i].name, counters[i].help, counters[i].name,
                counters[i].name, (unsigned long long)counters[i].v);
    fprintf(f, "# HELP frt_capsule_restores_total Capsule restores, by the tier restored from.\n"
               "# TYPE frt_capsule_restores_total counter\n");
    for (int t = 0; t < FRT_ENGINE_N_TIERS; t++)
        fprintf(f, "frt_capsule_restores_total{tier=\"%s\"} %llu\n", frt_engine_tier_name(t),
                (unsigned long long)st.restores[t]);
    fprintf(f, "# HELP frt_capsule_restore_seconds_total Time spent restoring capsules.\n"
               "# TYPE frt_capsule_restore_seconds_total counter\nfrt_capsule_restore_seconds_total %.6f\n",
            m.restore_ms_sum / 1e3);
    fprintf(f, "# HELP frt_capsule_bytes Capsule bytes held, by tier.\n# TYPE frt_capsule_bytes gauge\n");
    for (int t = 0; t < FRT_ENGINE_N_TIERS; t++)
        fprintf(f, "frt_capsule_bytes{tier=\"%s\"} %zu\n", frt_engine_tier_name(t), frt_registry_bytes(r, t));
    fprintf(f, "# HELP frt_capsule_budget_bytes Capsule byte budget, by tier.\n# TYPE frt_capsule_budget_bytes gauge\n");
    for (int t = 0; t < FRT_ENGINE_N_TIERS; t++)
        fprintf(f, "frt_capsule_budget_bytes{tier=\"%s\"} %zu\n", frt_engine_tier_name(t), frt_registry_budget(r, t));
    fprintf(f, "# HELP frt_capsules Capsules held, by tier.\n# TYPE frt_capsules gauge\n");
    for (int t = 0; t < FRT_ENGINE_N_TIERS; t++)
        fprintf(f, "frt_capsules{tier=\"%s\"} %d\n", frt_engine_tier_name(t), frt_registry_tier_count(r, t));
    fprintf(f, "# HELP frt_sessions Sessions.\n# TYPE frt_sessions gauge\nfrt_sessions %d\n",
            frt_service_sessions(s)->n);
    if (h) {
        fprintf(f, "# HELP frt_queue_depth Requests waiting for the engine.\n# TYPE frt_queue_depth gauge\n"
                   "frt_queue_depth %d\n",
                h->queue_depth);
        fprintf(f, "# HELP frt_http_responses_total HTTP responses, by status class.\n"
                   "# TYPE frt_http_responses_total counter\n");
        for (int c = 2; c <= 5; c++)
            fprintf(f, "frt_http_responses_total{code=\"%dxx\"} %llu\n", c, (unsigned long long)h->responses[c]);
        fprintf(f, "# HELP frt_http_rejected_busy_total Requests answered 503 because the queue was full.\n"
                   "# TYPE frt_http_rejected_busy_total counter\nfrt_http_rejected_busy_total %llu\n",
                (unsigned long long)h->rejected_busy);
        fprintf(f, "# HELP frt_uptime_seconds Seconds since the server started.\n# TYPE frt_uptime_seconds gauge\n"
                   "frt_uptime_seconds %.3f\n",
                h->uptime_s);
    }
    fclose(f);
    return buf;
}
