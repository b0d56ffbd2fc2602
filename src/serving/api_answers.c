/*
 * serving/api_answers.c - the OpenAI-compatible wire format, the answer
 * side (see api.h and docs/serving.md): completion objects, stream chunks,
 * listings, the small objects of the session and capsule endpoints, health,
 * models, Prometheus metrics. Every JSON object the server sends is built
 * here.
 */
#include "serving/api.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The frt object's record of a forked request: each returned choice's
 * branch, sampler seed, cumulative logprob and tokens. */
static void choices_frt(json_t *o, const frt_gen_result *r)
{
    json_t *a = json_array();
    for (int i = 0; i < r->n_choices; i++) {
        const frt_gen_choice *c = &r->choices[i];
        json_t *x = json_object(), *t = json_array();
        json_object_set_new(x, "index", json_integer(i));
        json_object_set_new(x, "branch", json_integer(c->branch));
        json_object_set_new(x, "seed", json_integer((json_int_t)c->seed));
        json_object_set_new(x, "logprob", json_real(c->logprob));
        for (int k = 0; k < c->n_tokens; k++) json_array_append_new(t, json_integer(c->tokens[k]));
        json_object_set_new(x, "tokens", t);
        json_object_set_new(x, "completion_tokens", json_integer(c->n_tokens));
        json_array_append_new(a, x);
    }
    json_object_set_new(o, "branches", json_integer(r->n_branches));
    json_object_set_new(o, "fork_seed", json_integer((json_int_t)r->fork_seed));
    json_object_set_new(o, "choices", a);
}

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
    if (r->time_limited) json_object_set_new(o, "time_limited", json_true());
    json_object_set_new(o, "position", json_integer(r->position));
    json_object_set_new(o, "session_id", r->session_id[0] ? json_string(r->session_id) : json_null());
    json_t *t = json_array();
    for (int i = 0; i < r->n_tokens; i++) json_array_append_new(t, json_integer(r->tokens[i]));
    json_object_set_new(o, "tokens", t);
    if (r->choices) choices_frt(o, r);
    if (r->masks) {
        json_t *g = json_object();
        json_object_set_new(g, "masks", json_integer(r->masks));
        json_object_set_new(g, "mask_ms", ms(r->mask_ms));
        json_object_set_new(g, "mask_ms_mean", ms(r->mask_ms / r->masks));
        json_object_set_new(o, "grammar", g);
    }
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

/* One choice of a whole answer: its text, or for chat its message (borrowed;
 * NULL = {"role": "assistant", "content": text}), and its logprobs object
 * (stolen; NULL = null). */
static json_t *choice_json(const frt_api_ident *id, int index, const char *t, size_t len, const json_t *message,
                           const char *finish, json_t *logprobs)
{
    json_t *ch = json_object();
    json_object_set_new(ch, "index", json_integer(index));
    json_t *text = message ? NULL : json_stringn(t ? t : "", t ? len : 0);
    if (id->chat && message) {
        json_object_set_new(ch, "message", json_deep_copy(message));
    } else if (id->chat) {
        json_t *m = json_object();
        json_object_set_new(m, "role", json_string("assistant"));
        json_object_set_new(m, "content", text);
        json_object_set_new(ch, "message", m);
    } else {
        json_object_set_new(ch, "text", text);
    }
    json_object_set_new(ch, "logprobs", logprobs ? logprobs : json_null());
    json_object_set_new(ch, "finish_reason", json_string(finish ? finish : "stop"));
    return ch;
}

/* The fields every whole answer ends with. */
static json_t *answer_tail(json_t *o, json_t *choices, const frt_gen_result *res)
{
    json_object_set_new(o, "choices", choices);
    json_object_set_new(o, "usage", usage_json(res));
    if (res->session_id[0]) json_object_set_new(o, "session_id", json_string(res->session_id));
    json_object_set_new(o, "frt", frt_api_frt_json(res));
    return o;
}

json_t *frt_api_completion_json(const frt_api_ident *id, const frt_gen_result *res, const json_t *message,
                                const char *finish)
{
    json_t *choices = json_array();
    if (!finish) finish = res->finish_reason;
    json_array_append_new(choices, choice_json(id, 0, res->text, res->text_len, message, finish,
                                               frt_api_result_logprobs_json(id, res)));
    return answer_tail(head_json(id, 0), choices, res);
}

json_t *frt_api_choices_json(const frt_api_ident *id, const frt_gen_result *res, json_t *const *messages,
                             const char *const *finishes)
{
    json_t *choices = json_array();
    for (int i = 0; i < res->n_choices; i++) {
        const frt_gen_choice *c = &res->choices[i];
        json_array_append_new(choices, choice_json(id, i, c->text, c->text_len, messages ? messages[i] : NULL,
                                                   finishes ? finishes[i] : c->finish_reason, NULL));
    }
    return answer_tail(head_json(id, 0), choices, res);
}

json_t *frt_api_chunk_index(json_t *chunk, int index)
{
    json_t *ch = json_array_get(json_object_get(chunk, "choices"), 0);
    if (ch) json_object_set_new(ch, "index", json_integer(index));
    return chunk;
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

json_t *frt_api_delta_chunk_json(const frt_api_ident *id, json_t *delta)
{
    json_t *o = head_json(id, 1), *ch = json_object(), *choices = json_array();
    json_object_set_new(ch, "index", json_integer(0));
    json_object_set_new(ch, "delta", delta);
    json_object_set_new(ch, "logprobs", json_null());
    json_object_set_new(ch, "finish_reason", json_null());
    json_array_append_new(choices, ch);
    json_object_set_new(o, "choices", choices);
    return o;
}

json_t *frt_api_logprobs_chunk_json(const frt_api_ident *id, json_t *logprobs)
{
    json_t *o = frt_api_chunk_json(id, "", 0, 0, NULL, NULL);
    json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
    if (id->chat) json_object_set_new(ch, "delta", json_object());
    json_object_set_new(ch, "logprobs", logprobs ? logprobs : json_null());
    return o;
}

json_t *frt_api_usage_chunk_json(const frt_api_ident *id, const frt_gen_result *res)
{
    json_t *o = head_json(id, 1);
    json_object_set_new(o, "choices", json_array());
    json_object_set_new(o, "usage", usage_json(res));
    return o;
}

/* ---- small answers -------------------------------------------------------------------- */

char *frt_api_dumps(json_t *o)
{
    if (!o) return NULL;
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(o);
    return s;
}

json_t *frt_api_deleted_json(const char *id, const char *object)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "object", json_string(object));
    json_object_set_new(o, "deleted", json_true());
    return o;
}

json_t *frt_api_list_json(json_t *data)
{
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data ? data : json_array());
    return o;
}

json_t *frt_api_checkpoint_json(const char *session_id, const char *name, uint64_t capsule, int position, int pinned)
{
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("checkpoint"));
    json_object_set_new(o, "session_id", json_string(session_id));
    json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "capsule", cap_or_null(capsule));
    json_object_set_new(o, "position", json_integer(position));
    json_object_set_new(o, "pinned", json_boolean(pinned));
    return o;
}

json_t *frt_api_model_json(const frt_engine_facts *f, long long created)
{
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(f->model_id));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer(created));
    json_object_set_new(m, "owned_by", json_string("frt"));
    json_t *x = json_object();
    json_object_set_new(x, "backend", json_string(f->backend));
    json_object_set_new(x, "max_seq", json_integer(f->max_seq));
    json_object_set_new(x, "prefill_chunk", json_integer(f->prefill_chunk));
    json_object_set_new(x, "vocab_size", json_integer(f->vocab_size));
    json_object_set_new(m, "frt", x);
    return m;
}

json_t *frt_api_models_json(const frt_engine_facts *f, long long created)
{
    json_t *data = json_array();
    json_array_append_new(data, frt_api_model_json(f, created));
    return frt_api_list_json(data);
}

json_t *frt_api_health_json(const frt_service *s, const frt_http_stats *h)
{
    const frt_engine_facts *f = frt_service_facts(s);
    json_t *o = json_object();
    json_object_set_new(o, "status", json_string("ok"));
    json_object_set_new(o, "model", json_string(f->model_id));
    json_object_set_new(o, "backend", json_string(f->backend));
    json_object_set_new(o, "queue_depth", json_integer(h->queue_depth));
    json_object_set_new(o, "running", json_boolean(h->running));
    json_object_set_new(o, "sessions", json_integer(frt_service_sessions(s)->n));
    json_object_set_new(o, "uptime_s", json_real(h->uptime_s));
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
    json_object_set_new(json_object_get(tiers, "disk"), "other_bytes",
                        json_integer((json_int_t)frt_registry_disk_other_bytes(r)));
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

json_t *frt_api_checkpoints_json(const frt_service *s, const frt_session *x)
{
    json_t *o = frt_api_session_json(s, x);
    json_t *l = frt_api_list_json(json_incref(json_object_get(o, "checkpoints")));
    json_decref(o);
    return l;
}

json_t *frt_api_session_by_id_json(const frt_service *s, const char *id)
{
    const frt_session *x = frt_sessions_find(frt_service_sessions(s), id);
    return x ? frt_api_session_json(s, x) : json_object();
}

json_t *frt_api_sessions_by_ids_json(const frt_service *s, const char (*ids)[FRT_SESSION_ID_MAX], int n)
{
    json_t *data = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(data, frt_api_session_by_id_json(s, ids[i]));
    return frt_api_list_json(data);
}

json_t *frt_api_capsule_by_id_json(const frt_service *s, uint64_t id)
{
    const frt_cap *c = frt_registry_get(frt_service_registry(s), id);
    return c ? frt_api_capsule_json(s, c) : json_object();
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
        {"frt_requests_time_limited_total", "Completions stopped by the wall-time limit per request.", m.time_limited},
        {"frt_session_displacements_total", "Hot sessions snapshotted when another took the live state.", m.displacements},
        {"frt_capsule_snapshots_total", "Capsules snapshotted into the registry.", st.snapshots},
        {"frt_capsule_snapshot_failures_total", "Snapshots that found no room in any tier.", m.snapshot_failures},
        {"frt_capsule_restore_failures_total", "Restores that failed (the request rebuilt instead).", m.restore_failures},
        {"frt_capsule_demotions_total", "Capsules moved one tier down by the budgets.", st.demotions},
        {"frt_capsule_promotions_total", "Capsules moved up on restore.", st.promotions},
        {"frt_capsule_restore_prefills_total", "Device-tier restores that ran the first prefill piece in the same "
                                               "call.", st.restore_prefills},
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
    fprintf(f, "# HELP frt_capsule_dir_other_bytes Bytes in the capsule dir that are not capsules (index, other "
               "models, quarantined, foreign files), counted in the disk tier.\n"
               "# TYPE frt_capsule_dir_other_bytes gauge\nfrt_capsule_dir_other_bytes %zu\n",
            frt_registry_disk_other_bytes(r));
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
        fprintf(f, "# HELP frt_http_rejected_queue_timeout_total Requests answered 503 after waiting past the queue "
                   "deadline.\n# TYPE frt_http_rejected_queue_timeout_total counter\n"
                   "frt_http_rejected_queue_timeout_total %llu\n",
                (unsigned long long)h->rejected_queue_timeout);
        fprintf(f, "# HELP frt_http_rejected_auth_total Requests answered 401 (missing or wrong API key).\n"
                   "# TYPE frt_http_rejected_auth_total counter\nfrt_http_rejected_auth_total %llu\n",
                (unsigned long long)h->rejected_auth);
        fprintf(f, "# HELP frt_running Requests running on the engine (0 or 1).\n# TYPE frt_running gauge\n"
                   "frt_running %d\n",
                h->running);
        fprintf(f, "# HELP frt_uptime_seconds Seconds since the server started.\n# TYPE frt_uptime_seconds gauge\n"
                   "frt_uptime_seconds %.3f\n",
                h->uptime_s);
    }
    fclose(f);
    return buf;
}
