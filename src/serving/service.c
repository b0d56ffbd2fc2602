/*
 * serving/service.c - the serving core: sessions over the registry, the
 * planner's decisions carried out on the engine, the generation loop.
 * See service.h and planner.h.
 */
#include "serving/service.h"

#include "serving/text.h"
#include "util/error.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct frt_service {
    frt_engine *e;
    frt_service_params p;
    frt_registry *reg;
    frt_sessions sessions;
    frt_session *anon; /* sessionless requests */
    frt_session *hot;  /* the session in the live state, or NULL */
    int hot_dirty;     /* the live state moved past hot->capsule */
    pthread_mutex_t mu;
    frt_service_metrics m;
};

const double frt_ttft_bounds[FRT_TTFT_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 1e300};

double frt_service_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

frt_service_params frt_service_default_params(void)
{
    frt_service_params p;
    memset(&p, 0, sizeof p);
    p.budget[FRT_ENGINE_TIER_DEVICE] = (size_t)1 << 30;
    p.budget[FRT_ENGINE_TIER_HOST] = (size_t)8 << 30;
    p.budget[FRT_ENGINE_TIER_DISK] = (size_t)64 << 30;
    p.displace_tier = FRT_ENGINE_TIER_HOST;
    p.auto_capsules = 1;
    return p;
}

int frt_service_create(frt_engine *e, const frt_service_params *p, frt_service **out)
{
    if (!e || !out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "service: NULL argument");
    frt_service_params d = frt_service_default_params();
    if (!p) p = &d;
    const int C = e->facts.prefill_chunk;
    if (p->prefill_piece < 0 || (p->prefill_piece && p->prefill_piece % C) || p->displace_tier < 0 ||
        p->displace_tier >= FRT_ENGINE_N_TIERS)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "service: prefill_piece must be a multiple of %d", C);
    frt_service *s = calloc(1, sizeof *s);
    if (!s) return frt_error(FRT_ERR_OUT_OF_MEMORY, "service");
    s->e = e;
    s->p = *p;
    s->p.capsule_dir = NULL; /* not kept */
    if (!s->p.prefill_piece) s->p.prefill_piece = 4 * C;
    pthread_mutex_init(&s->mu, NULL);
    frt_registry_params rp;
    memcpy(rp.budget, p->budget, sizeof rp.budget);
    rp.dir = p->capsule_dir;
    int rc = frt_registry_open(e, &rp, &s->reg);
    if (!rc && !(s->anon = frt_session_new(""))) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "service");
    if (rc) {
        frt_service_free(s);
        return rc;
    }
    s->anon->anonymous = 1;
    e->reset(e->self);
    *out = s;
    return 0;
}

void frt_service_free(frt_service *s)
{
    if (!s) return;
    frt_registry_close(s->reg);
    frt_sessions_clear(&s->sessions);
    frt_session_free(s->anon);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void frt_service_lock(frt_service *s) { pthread_mutex_lock(&s->mu); }
void frt_service_unlock(frt_service *s) { pthread_mutex_unlock(&s->mu); }
const frt_engine_facts *frt_service_facts(const frt_service *s) { return &s->e->facts; }
const frt_sessions *frt_service_sessions(const frt_service *s) { return &s->sessions; }
const frt_registry *frt_service_registry(const frt_service *s) { return s->reg; }
const frt_session *frt_service_hot(const frt_service *s) { return s->hot; }
void frt_service_metrics_get(const frt_service *s, frt_service_metrics *m) { *m = s->m; }

/* ---- references and boundaries (called under the lock) --------------------------- */

static void drop_ref(frt_service *s, uint64_t *id, int pin)
{
    if (*id) frt_registry_ref(s->reg, *id, -1, pin);
    *id = 0;
}

static void take_ref(frt_service *s, uint64_t id, int pin)
{
    if (id) frt_registry_ref(s->reg, id, +1, pin);
}

/* Snapshots the live state as sess's boundary (sess must be hot). */
static int snapshot_boundary(frt_service *s, frt_session *sess)
{
    frt_cap_spec spec = {FRT_CAP_SESSION, s->p.displace_tier, sess->journal, sess->n, sess->pending, sess->exact,
                         sess->salt, sess->salt_len, 0, sess->id};
    uint64_t id = 0;
    int rc = frt_registry_snapshot(s->reg, &spec, &id);
    drop_ref(s, &sess->capsule, sess->pinned);
    if (rc) {
        s->m.snapshot_failures++;
        return rc;
    }
    sess->capsule = id;
    take_ref(s, id, sess->pinned);
    s->hot_dirty = 0;
    return 0;
}

/* Makes sure a capsule holds sess's current boundary. */
static int ensure_boundary(frt_service *s, frt_session *sess)
{
    if (s->hot == sess) {
        if (s->hot_dirty || !frt_registry_get(s->reg, sess->capsule)) return snapshot_boundary(s, sess);
        return 0;
    }
    if (frt_registry_get(s->reg, sess->capsule)) return 0;
    if (sess->n == 0) return 0;
    return frt_error(FRT_ERR_STATE, "session '%s': its boundary was evicted (the next request rebuilds it)",
                     sess->id);
}

/* The hot session leaves the live state: keep its boundary in a capsule. */
static void displace(frt_service *s)
{
    frt_session *h = s->hot;
    if (!h) return;
    if (!h->anonymous && (s->hot_dirty || !frt_registry_get(s->reg, h->capsule))) {
        if (snapshot_boundary(s, h) == 0) s->m.displacements++;
    }
    s->hot = NULL;
    s->hot_dirty = 0;
}

/* ---- completions ---------------------------------------------------------------- */

void frt_gen_result_clear(frt_gen_result *res)
{
    if (!res) return;
    free(res->text);
    free(res->tokens);
    memset(res, 0, sizeof *res);
}

int frt_service_chat_prompt(frt_service *s, const frt_engine_msg *msgs, int n, char **text)
{
    return s->e->chat_format(s->e->self, msgs, n, 1, text);
}

static int is_prefix(const int32_t *a, int na, const int32_t *ids, int n)
{
    return na <= n && (na == 0 || !memcmp(a, ids, (size_t)na * sizeof *ids));
}

static int is_eos(const frt_engine *e, int32_t t)
{
    for (int i = 0; i < e->facts.n_eos; i++)
        if (e->facts.eos_ids[i] == t) return 1;
    return 0;
}

/* Text-level continuation: when the prompt text starts with the text of the
 * session's journal (+ pending token), the prompt is the journal's tokens
 * followed by the tokens of the rest of the text. This keeps a session
 * appendable when re-tokenizing the generated text would give other ids. */
static int text_continuation(frt_service *s, const frt_session *sess, const frt_gen_request *rq, int32_t **ids,
                             int *n)
{
    frt_engine *e = s->e;
    for (int with_pending = sess->pending >= 0; with_pending >= 0; with_pending--) {
        int nj = sess->n + with_pending;
        int32_t *j = malloc((size_t)(nj ? nj : 1) * sizeof *j);
        if (!j) return 0;
        memcpy(j, sess->journal, (size_t)sess->n * sizeof *j);
        if (with_pending) j[sess->n] = sess->pending;
        char *jt = NULL;
        size_t jl = 0;
        if (e->detokenize(e->self, j, (size_t)nj, &jt, &jl) == 0 && jl <= rq->text_len &&
            !memcmp(jt, rq->text, jl)) {
            int32_t *rest = NULL;
            size_t nr = 0;
            if (jl == rq->text_len || e->tokenize(e->self, rq->text + jl, rq->text_len - jl, &rest, &nr) == 0) {
                int32_t *all = malloc((size_t)(nj + (int)nr + 1) * sizeof *all);
                if (all) {
                    memcpy(all, j, (size_t)nj * sizeof *all);
                    if (nr) memcpy(all + nj, rest, nr * sizeof *all);
                    free(*ids);
                    *ids = all;
                    *n = nj + (int)nr;
                }
                free(rest);
                free(jt);
                free(j);
                return all != NULL;
            }
        }
        free(jt);
        free(j);
    }
    return 0;
}

/* Streaming state of the generated text. */
typedef struct emitter {
    frt_service *s;
    const frt_gen_request *rq;
    size_t emitted; /* raw bytes of committed text already passed to on_text */
    int stop_cb;    /* on_text asked to stop */
} emitter;

static void emit(emitter *em, const char *raw, size_t from, size_t to)
{
    if (!em->rq->on_text || to <= from || em->stop_cb) return;
    size_t len = 0;
    char *clean = frt_utf8_sanitize(raw + from, to - from, &len);
    if (clean && len && em->rq->on_text(em->rq->user, clean, len)) em->stop_cb = 1;
    free(clean);
    em->emitted = to;
}

/* Passes on the committed text g[0..kc) that can no longer change. */
static void emit_committed(emitter *em, const int32_t *g, int kc)
{
    frt_engine *e = em->s->e;
    if (!em->rq->on_text || kc <= 0) return;
    char *t = NULL;
    size_t len = 0;
    if (e->detokenize(e->self, g, (size_t)kc, &t, &len)) return;
    size_t safe = frt_utf8_complete_len(t, len);
    size_t hold = frt_stop_holdback(t, len, em->rq->stop, em->rq->n_stop);
    if (len - hold < safe) safe = len - hold;
    if (safe > em->emitted) emit(em, t, em->emitted, safe);
    free(t);
}

static int cancelled(const frt_gen_request *rq, const emitter *em)
{
    return (rq->cancel && *rq->cancel) || em->stop_cb;
}

int frt_service_generate(frt_service *s, const frt_gen_request *rq, frt_gen_result *res)
{
    if (!s || !rq || !res) return frt_error(FRT_ERR_INVALID_ARGUMENT, "generate: NULL argument");
    memset(res, 0, sizeof *res);
    const double t0 = rq->t_arrival > 0 ? rq->t_arrival : frt_service_now();
    frt_engine *e = s->e;
    const int C = e->facts.prefill_chunk, max_seq = e->facts.max_seq;
    if (rq->max_tokens < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "max_tokens must be at least 1");
    if (!rq->text && (rq->n_ids < 1 || !rq->ids)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "the prompt is empty");

    pthread_mutex_lock(&s->mu);
    frt_session *sess = rq->session_id ? frt_sessions_find(&s->sessions, rq->session_id) : s->anon;
    pthread_mutex_unlock(&s->mu);
    if (!sess) return frt_error(FRT_ERR_NOT_FOUND, "no session '%s'", rq->session_id);

    /* the prompt's tokens */
    int32_t *ids = NULL;
    int n = 0, rc = 0;
    if (rq->text) {
        size_t nn = 0;
        FRT_TRY(e->tokenize(e->self, rq->text, rq->text_len, &ids, &nn));
        n = (int)nn;
    } else {
        if (!(ids = malloc((size_t)rq->n_ids * sizeof *ids))) return frt_error(FRT_ERR_OUT_OF_MEMORY, "generate");
        memcpy(ids, rq->ids, (size_t)rq->n_ids * sizeof *ids);
        n = rq->n_ids;
        for (int i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= e->facts.vocab_size) {
                rc = frt_error(FRT_ERR_INVALID_ARGUMENT, "prompt token %d is outside the vocabulary [0, %d)",
                               ids[i], e->facts.vocab_size);
                free(ids);
                return rc;
            }
    }
    if (rq->text && sess->n > 0 && !is_prefix(sess->journal, sess->n, ids, n)) text_continuation(s, sess, rq, &ids, &n);
    if (n < 1) {
        free(ids);
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "the prompt is empty");
    }
    if (n > max_seq) {
        free(ids);
        return frt_error(FRT_ERR_OUT_OF_RANGE, "the prompt has %d tokens; the context holds %d", n, max_seq);
    }

    /* plan */
    pthread_mutex_lock(&s->mu);
    uint64_t *stored = malloc((size_t)(sess->n_ckpts + 1) * sizeof *stored);
    if (!stored) {
        pthread_mutex_unlock(&s->mu);
        free(ids);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "generate");
    }
    int n_stored = 0;
    if (sess->capsule) stored[n_stored++] = sess->capsule;
    for (int i = 0; i < sess->n_ckpts; i++) stored[n_stored++] = sess->ckpts[i].capsule;
    frt_plan_input in = {ids, n, sess->salt, sess->salt_len, rq->pin_len, s->p.auto_capsules, sess->anonymous,
                         s->hot == sess, sess->journal, sess->n, sess->exact, stored, n_stored};
    frt_plan plan;
    rc = frt_plan_make(s->reg, C, &in, &plan);
    free(stored);
    if (rc) {
        pthread_mutex_unlock(&s->mu);
        free(ids);
        return rc;
    }
    if (plan.action != FRT_PREFIX_APPEND) {
        if (s->hot != sess) displace(s);
        s->hot = NULL;
    }
    if (plan.action == FRT_PREFIX_RESTORE) {
        double tr = frt_service_now();
        rc = frt_registry_restore(s->reg, plan.capsule, NULL);
        res->restore_ms = 1e3 * (frt_service_now() - tr);
        const frt_cap *c = rc ? NULL : frt_registry_get(s->reg, plan.capsule);
        if (c) {
            res->restored = c->id;
            frt_session_set_journal(sess, c->tokens, c->position);
            sess->pending = c->pending;
            sess->exact = c->exact;
        } else {
            /* the capsule could not be restored: a cold rebuild is always exact */
            s->m.restore_failures++;
            plan.action = FRT_PREFIX_REBUILD;
            plan.capsule = 0;
            plan.start = 0;
            plan.start_exact = plan.exact = 1;
            if (s->p.auto_capsules && !plan.auto_at && n / C * C > plan.pin_at) plan.auto_at = n / C * C;
        }
    }
    if (plan.action == FRT_PREFIX_REBUILD) {
        e->reset(e->self);
        sess->n = 0;
        sess->pending = -1;
        sess->exact = 1;
    }
    s->hot = sess;
    s->hot_dirty = 1;
    if (plan.pin_existing && frt_registry_pin(s->reg, plan.pin_existing, 1) == 0) res->pinned = plan.pin_existing;
    res->pin_unavailable = plan.pin_unavailable;
    res->action = plan.action;
    res->prompt_tokens = n;
    res->cached_tokens = plan.start;
    sess->busy = 1;
    if (rq->session_id) snprintf(res->session_id, sizeof res->session_id, "%s", sess->id);
    pthread_mutex_unlock(&s->mu);
    res->prefill_tokens = n - plan.start;
    if (rq->on_start) rq->on_start(rq->user, res);

    /* prefill start..n-1 in pieces cut at absolute multiples of the piece
     * size (multiples of C: the same operations as one call), stopping at
     * the pin and auto capsule boundaries to snapshot there */
    emitter em = {s, rq, 0, 0};
    const int P = s->p.prefill_piece;
    int pos = plan.start;
    if (e->position(e->self) != pos)
        rc = frt_error(FRT_ERR_STATE, "generate: the live state holds %d tokens, the plan expects %d",
                       e->position(e->self), pos);
    double tp = frt_service_now();
    while (!rc) {
        if ((plan.pin_at && pos == plan.pin_at) || (plan.auto_at && pos == plan.auto_at)) {
            int pin = plan.pin_at && pos == plan.pin_at;
            frt_cap_spec spec = {FRT_CAP_PREFIX, s->p.displace_tier, sess->journal, sess->n, -1, 1,
                                 sess->salt, sess->salt_len, pin, NULL};
            uint64_t id = 0;
            pthread_mutex_lock(&s->mu);
            if (frt_registry_snapshot(s->reg, &spec, &id) == 0) {
                if (pin) res->pinned = id;
            } else {
                s->m.snapshot_failures++;
            }
            pthread_mutex_unlock(&s->mu);
        }
        if (pos >= n || cancelled(rq, &em)) break;
        int end = (pos / P + 1) * P;
        if (end > n) end = n;
        if (plan.pin_at > pos && plan.pin_at < end) end = plan.pin_at;
        if (plan.auto_at > pos && plan.auto_at < end) end = plan.auto_at;
        rc = e->prefill(e->self, ids + pos, end - pos);
        if (rc) break;
        pthread_mutex_lock(&s->mu);
        for (int i = pos; i < end; i++) frt_session_append(sess, ids[i]);
        sess->pending = -1;
        sess->exact = plan.exact;
        pthread_mutex_unlock(&s->mu);
        pos = end;
    }
    res->prefill_ms = 1e3 * (frt_service_now() - tp);
    res->prefill_tokens = pos - plan.start;

    /* generate: the first token from the prompt's logits, then decode steps;
     * each token is committed (fed) before the next is produced, the last
     * stays pending. Streamed text never runs ahead of the committed tokens. */
    int32_t *g = NULL;
    int k = 0, eos_tail = 0, stopped = 0;
    size_t stop_at = 0;
    const char *finish = "cancelled";
    int max_gen = rq->max_tokens < max_seq - n + 1 ? rq->max_tokens : max_seq - n + 1;
    int gcap = 0;
    if (!rc && pos == n && !cancelled(rq, &em)) {
        int32_t tok;
        if (rq->has_seed) e->seed(e->self, rq->seed);
        rc = e->sample(e->self, &rq->sampling, &tok);
        if (!rc) {
            res->ttft_ms = 1e3 * (frt_service_now() - t0);
            gcap = 64;
            if (!(g = malloc((size_t)gcap * sizeof *g))) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "generate");
        }
        if (!rc) {
            g[k++] = tok;
            pthread_mutex_lock(&s->mu);
            sess->pending = tok;
            pthread_mutex_unlock(&s->mu);
        }
        while (!rc) {
            int32_t last = g[k - 1];
            if (!rq->ignore_eos && is_eos(e, last)) {
                finish = "stop";
                eos_tail = 1;
                break;
            }
            if (rq->n_stop > 0) {
                char *t = NULL;
                size_t len = 0;
                if (e->detokenize(e->self, g, (size_t)k, &t, &len) == 0 &&
                    frt_stop_find(t, len, rq->stop, rq->n_stop, &stop_at)) {
                    free(t);
                    finish = "stop";
                    stopped = 1;
                    break;
                }
                free(t);
            }
            if (k >= max_gen) {
                finish = "length";
                break;
            }
            if (cancelled(rq, &em)) break;
            rc = e->decode(e->self, &rq->sampling, &tok);
            if (rc) break;
            if (k == gcap) {
                int32_t *ng = realloc(g, (size_t)(2 * gcap) * sizeof *g);
                if (!ng) {
                    rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "generate");
                    break;
                }
                g = ng;
                gcap *= 2;
            }
            g[k++] = tok;
            pthread_mutex_lock(&s->mu);
            frt_session_append(sess, last);
            sess->pending = tok;
            sess->exact = 0;
            pthread_mutex_unlock(&s->mu);
            emit_committed(&em, g, k - 1);
        }
    }

    /* the final text: without the end-of-sequence id and the stop string */
    if (!rc && k > 0) {
        char *t = NULL;
        size_t len = 0;
        rc = e->detokenize(e->self, g, (size_t)(k - eos_tail), &t, &len);
        if (!rc) {
            size_t cut = stopped && stop_at < len ? stop_at : len;
            if (em.emitted > cut) em.emitted = cut;
            if (!cancelled(rq, &em)) emit(&em, t, em.emitted, cut);
            res->text = frt_utf8_sanitize(t, cut, &res->text_len);
            if (!res->text) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "generate");
            free(t);
        }
    }
    if (!rc && cancelled(rq, &em)) finish = "cancelled";
    if (!rc && !res->text) res->text = calloc(1, 1);
    res->tokens = g;
    res->n_tokens = k;
    res->completion_tokens = k;
    res->finish_reason = finish;
    res->total_ms = 1e3 * (frt_service_now() - t0);

    pthread_mutex_lock(&s->mu);
    sess->busy = 0;
    sess->requests++;
    res->position = sess->n;
    /* the boundary moved past the session's capsule */
    if (pos > plan.start || plan.action == FRT_PREFIX_REBUILD) drop_ref(s, &sess->capsule, sess->pinned);
    else if (plan.action == FRT_PREFIX_RESTORE && res->restored == sess->capsule) s->hot_dirty = 0;
    if (rc) {
        s->m.failed++;
    } else {
        s->m.requests[plan.action]++;
        if (!strcmp(finish, "cancelled")) s->m.cancelled++;
        s->m.prompt_tokens += (uint64_t)n;
        s->m.cached_tokens += (uint64_t)plan.start;
        s->m.prefill_tokens += (uint64_t)(pos - plan.start);
        s->m.generated_tokens += (uint64_t)k;
        s->m.restore_ms_sum += res->restore_ms;
        if (k > 0) {
            double t = res->ttft_ms / 1e3;
            s->m.ttft_sum += t;
            for (int b = 0; b < FRT_TTFT_BUCKETS; b++)
                if (t <= frt_ttft_bounds[b]) s->m.ttft_count[b]++;
        }
    }
    pthread_mutex_unlock(&s->mu);
    free(ids);
    if (rc) {
        int keep = rc;
        frt_gen_result_clear(res);
        return keep;
    }
    return 0;
}

/* ---- sessions ---------------------------------------------------------------------- */

int frt_service_session_create(frt_service *s, const char *id, const char *salt, size_t salt_len, int pin,
                               char out_id[FRT_SESSION_ID_MAX])
{
    pthread_mutex_lock(&s->mu);
    frt_session *sess = NULL;
    int rc = frt_sessions_add(&s->sessions, id, salt, salt_len, pin, &sess);
    if (!rc && out_id) snprintf(out_id, FRT_SESSION_ID_MAX, "%s", sess->id);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static void release_session(frt_service *s, frt_session *sess)
{
    if (s->hot == sess) s->hot = NULL;
    drop_ref(s, &sess->capsule, sess->pinned);
    for (int i = 0; i < sess->n_ckpts; i++) drop_ref(s, &sess->ckpts[i].capsule, sess->ckpts[i].pin);
    sess->n_ckpts = 0;
}

int frt_service_session_delete(frt_service *s, const char *id)
{
    pthread_mutex_lock(&s->mu);
    frt_session *sess = frt_sessions_find(&s->sessions, id);
    int rc = sess ? 0 : frt_error(FRT_ERR_NOT_FOUND, "no session '%s'", id ? id : "");
    if (sess) {
        release_session(s, sess);
        frt_sessions_remove(&s->sessions, sess);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int frt_service_session_fork(frt_service *s, const char *id, int n, char (*out_ids)[FRT_SESSION_ID_MAX])
{
    if (n < 1 || n > 64) return frt_error(FRT_ERR_INVALID_ARGUMENT, "fork: n must be 1..64 (got %d)", n);
    pthread_mutex_lock(&s->mu);
    frt_session *par = frt_sessions_find(&s->sessions, id);
    int rc = par ? ensure_boundary(s, par) : frt_error(FRT_ERR_NOT_FOUND, "no session '%s'", id ? id : "");
    for (int i = 0; !rc && i < n; i++) {
        frt_session *c = NULL;
        rc = frt_sessions_add(&s->sessions, NULL, par->salt, par->salt_len, par->pinned, &c);
        if (!rc) rc = frt_session_set_journal(c, par->journal, par->n);
        if (rc) break;
        c->pending = par->pending;
        c->exact = par->exact;
        c->capsule = par->capsule;
        take_ref(s, c->capsule, c->pinned);
        if (out_ids) snprintf(out_ids[i], FRT_SESSION_ID_MAX, "%s", c->id);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int frt_service_checkpoint(frt_service *s, const char *id, const char *name, int pin, uint64_t *capsule)
{
    if (!frt_session_id_valid(name))
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "checkpoint name must be 1 to %d characters of letters, digits, '.', '_', '-', ':'",
                         FRT_SESSION_ID_MAX - 1);
    pthread_mutex_lock(&s->mu);
    frt_session *sess = frt_sessions_find(&s->sessions, id);
    int rc = sess ? ensure_boundary(s, sess) : frt_error(FRT_ERR_NOT_FOUND, "no session '%s'", id ? id : "");
    if (!rc && !sess->capsule) rc = frt_error(FRT_ERR_STATE, "session '%s' has no tokens yet", sess->id);
    if (!rc) {
        for (int i = 0; i < sess->n_ckpts; i++) {
            if (strcmp(sess->ckpts[i].name, name)) continue;
            drop_ref(s, &sess->ckpts[i].capsule, sess->ckpts[i].pin);
            frt_session_remove_checkpoint(sess, i);
            break;
        }
        rc = frt_session_add_checkpoint(sess, name, sess->capsule, pin ? 1 : 0);
    }
    if (!rc) {
        take_ref(s, sess->capsule, pin ? 1 : 0);
        frt_registry_set_name(s->reg, sess->capsule, name);
        if (capsule) *capsule = sess->capsule;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int frt_service_rollback(frt_service *s, const char *id, const char *name)
{
    pthread_mutex_lock(&s->mu);
    frt_session *sess = frt_sessions_find(&s->sessions, id);
    frt_checkpoint *ck = sess ? frt_session_checkpoint(sess, name) : NULL;
    const frt_cap *c = ck ? frt_registry_get(s->reg, ck->capsule) : NULL;
    int rc = 0;
    if (!sess) rc = frt_error(FRT_ERR_NOT_FOUND, "no session '%s'", id ? id : "");
    else if (!ck) rc = frt_error(FRT_ERR_NOT_FOUND, "session '%s' has no checkpoint '%s'", sess->id, name ? name : "");
    else if (!c) rc = frt_error(FRT_ERR_NOT_FOUND, "the capsule of checkpoint '%s' was deleted", name);
    if (!rc) {
        if (s->hot == sess) s->hot = NULL; /* the live state past the checkpoint is discarded */
        uint64_t cid = c->id;
        take_ref(s, cid, sess->pinned); /* before dropping the old one: it may be the same capsule */
        drop_ref(s, &sess->capsule, sess->pinned);
        sess->capsule = cid;
        c = frt_registry_get(s->reg, cid);
        rc = frt_session_set_journal(sess, c->tokens, c->position);
        sess->pending = c->pending;
        sess->exact = c->exact;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int frt_service_capsule_pin(frt_service *s, uint64_t id, int pin)
{
    pthread_mutex_lock(&s->mu);
    int rc = frt_registry_pin(s->reg, id, pin);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int frt_service_capsule_delete(frt_service *s, uint64_t id)
{
    pthread_mutex_lock(&s->mu);
    int rc = frt_registry_delete(s->reg, id);
    if (!rc) {
        /* sessions that held it fall back to other plans */
        for (int i = 0; i < s->sessions.n; i++) {
            frt_session *x = s->sessions.v[i];
            if (x->capsule == id) x->capsule = 0;
            for (int j = 0; j < x->n_ckpts; j++)
                if (x->ckpts[j].capsule == id) x->ckpts[j].capsule = 0;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}
