/*
 * serving/service.c - the serving core: sessions over the registry, the
 * planner's decisions carried out on the engine, the generation loop.
 * See service.h and planner.h.
 */
#include "serving/service_int.h"

#include "serving/text.h"
#include "util/error.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    if (p->prefill_piece < 0 || (p->prefill_piece && p->prefill_piece % C))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "service: prefill_piece must be a multiple of %d", C);
    if (p->displace_tier < 0 || p->displace_tier >= FRT_ENGINE_N_TIERS)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "service: displace_tier must be 0..%d", FRT_ENGINE_N_TIERS - 1);
    if (p->max_tokens_cap < 0 || !(p->max_request_s >= 0))
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "service: max_tokens_cap and max_request_s must not be negative");
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
    free(res->logprobs);
    frt_gen_choices_free(res);
    memset(res, 0, sizeof *res);
}

int frt_service_chat_prompt(frt_service *s, const frt_chat_request *req, char **text, size_t *len, int32_t **ids,
                            size_t *n)
{
    if (!s || !req || !text) return frt_error(FRT_ERR_INVALID_ARGUMENT, "chat prompt: NULL argument");
    return s->e->chat_prompt(s->e->self, req, text, len, ids, n);
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

/* Passes text to the emitter's callback; its nonzero return stops. */
static void emit_to(frt_emitter *em, const char *t, size_t len)
{
    const frt_gen_request *rq = em->rq;
    int stop = em->index >= 0 ? rq->on_choice_text(rq->user, em->index, t, len) : rq->on_text(rq->user, t, len);
    if (stop) em->stop_cb = 1;
}

static int streams(const frt_emitter *em)
{
    return em->index >= 0 ? em->rq->on_choice_text != NULL : em->index == -1 && em->rq->on_text != NULL;
}

static void emit(frt_emitter *em, const char *raw, size_t from, size_t to)
{
    if (!streams(em) || to <= from || em->stop_cb) return;
    size_t len = 0;
    char *clean = frt_utf8_sanitize(raw + from, to - from, &len);
    if (clean && len) emit_to(em, clean, len);
    free(clean);
    em->emitted = to;
}

void frt_gen_emit_committed(frt_emitter *em, const int32_t *g, int kc)
{
    frt_engine *e = em->s->e;
    if (!streams(em) || kc <= 0) return;
    char *t = NULL;
    size_t len = 0;
    if (e->detokenize(e->self, g, (size_t)kc, &t, &len)) return;
    size_t safe = frt_utf8_complete_len(t, len);
    size_t hold = frt_stop_holdback(t, len, em->rq->stop, em->rq->n_stop);
    if (len - hold < safe) safe = len - hold;
    if (safe > em->emitted) emit(em, t, em->emitted, safe);
    free(t);
}

int frt_gen_cancelled(const frt_gen_request *rq, const frt_emitter *em)
{
    return (rq->cancel && *rq->cancel) || em->stop_cb;
}

int frt_gen_past_deadline(const frt_gen_run *r)
{
    return r->s->p.max_request_s > 0 && frt_service_now() - r->t0 > r->s->p.max_request_s;
}

int frt_gen_max_tokens(const frt_gen_run *r)
{
    const int max_seq = r->s->e->facts.max_seq;
    int max_gen = r->rq->max_tokens < max_seq - r->n + 1 ? r->rq->max_tokens : max_seq - r->n + 1;
    if (r->s->p.max_tokens_cap > 0 && max_gen > r->s->p.max_tokens_cap) max_gen = r->s->p.max_tokens_cap;
    return max_gen;
}

int frt_gen_seq_push(frt_gen_seq *q, int32_t tok)
{
    if (q->k == q->cap) {
        int nc = q->cap ? 2 * q->cap : 64;
        int32_t *ng = realloc(q->g, (size_t)nc * sizeof *ng);
        if (!ng) return frt_error(FRT_ERR_OUT_OF_MEMORY, "generate");
        q->g = ng;
        q->cap = nc;
    }
    q->g[q->k++] = tok;
    return 0;
}

int frt_gen_seq_done(frt_gen_run *r, frt_gen_seq *q, int max_gen)
{
    frt_engine *e = r->s->e;
    const frt_gen_request *rq = r->rq;
    if (!rq->ignore_eos && is_eos(e, q->g[q->k - 1])) {
        q->finish = "stop";
        q->eos_tail = 1;
        return 1;
    }
    if (rq->n_stop > 0) {
        char *t = NULL;
        size_t len = 0;
        int hit = e->detokenize(e->self, q->g, (size_t)q->k, &t, &len) == 0 &&
                  frt_stop_find(t, len, rq->stop, rq->n_stop, &q->stop_at);
        free(t);
        if (hit) {
            q->finish = "stop";
            q->stopped = 1;
            return 1;
        }
    }
    if (q->k >= max_gen) {
        q->finish = "length";
        return 1;
    }
    if (frt_gen_cancelled(rq, &q->em)) return 1;
    if (frt_gen_past_deadline(r)) {
        q->finish = "length";
        r->res->time_limited = 1;
        return 1;
    }
    return 0;
}

/* Step 0: the prompt's tokens (tokenized, or the ids checked against the
 * vocabulary), continued at the text level when the session's journal is a
 * text prefix of the prompt. */
static int gen_prompt(frt_gen_run *r)
{
    frt_engine *e = r->s->e;
    const frt_gen_request *rq = r->rq;
    if (rq->text) {
        size_t nn = 0;
        FRT_TRY(e->tokenize(e->self, rq->text, rq->text_len, &r->ids, &nn));
        r->n = (int)nn;
    } else {
        if (!(r->ids = malloc((size_t)rq->n_ids * sizeof *r->ids))) return frt_error(FRT_ERR_OUT_OF_MEMORY, "generate");
        memcpy(r->ids, rq->ids, (size_t)rq->n_ids * sizeof *r->ids);
        r->n = rq->n_ids;
        for (int i = 0; i < r->n; i++)
            if (r->ids[i] < 0 || r->ids[i] >= e->facts.vocab_size)
                return frt_error(FRT_ERR_INVALID_ARGUMENT, "prompt token %d is outside the vocabulary [0, %d)",
                                 r->ids[i], e->facts.vocab_size);
    }
    if (r->n < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "the prompt is empty");
    if (frt_gen_cartridge_rows(r)) FRT_TRY(frt_gen_cartridge_prompt(r));
    else if (rq->text && r->sess->n > 0 && !is_prefix(r->sess->journal, r->sess->n, r->ids, r->n))
        text_continuation(r->s, r->sess, rq, &r->ids, &r->n);
    const frt_sampling *sp = &rq->sampling;
    if (e->facts.no_logits) {
        const char *field = sp->min_p != 0.0f              ? "min_p"
                            : sp->presence_penalty != 0.0f  ? "presence_penalty"
                            : sp->frequency_penalty != 0.0f ? "frequency_penalty"
                            : sp->repetition_penalty != 0.0f && sp->repetition_penalty != 1.0f ? "repetition_penalty"
                            : sp->n_logit_bias              ? "logit_bias"
                            : sp->logprobs                  ? "logprobs"
                                                            : NULL;
        if (field) {
            r->res->error_param = field;
            return frt_error(FRT_ERR_UNSUPPORTED, "'%s' is not supported by this engine (it has no logits)", field);
        }
    }
    /* the request parser checked every range but the vocabulary's: the model's own check, before any prefill */
    if (sp->n_logit_bias) {
        int rc = frt_sampling_check(sp, e->facts.vocab_size);
        if (rc) {
            r->res->error_param = "logit_bias";
            return rc;
        }
    }
    const int max_seq = e->facts.max_seq;
    if (r->n > max_seq)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "the prompt has %d tokens; the context holds %d", r->n, max_seq);
    /* The last generated token stays pending (not in the state): a request
     * may generate up to max_seq - n + 1 tokens. */
    if (!rq->clamp_max_tokens && rq->max_tokens > max_seq - r->n + 1) {
        r->res->error_param = "max_tokens";
        return frt_error(FRT_ERR_OUT_OF_RANGE,
                         "This model's maximum context length is %d tokens. However, you requested %d tokens "
                         "(%d in the prompt, %d in the completion)",
                         max_seq + 1, r->n + rq->max_tokens, r->n, rq->max_tokens);
    }
    return 0;
}

/* Step 1 of a request that starts from a cartridge (under the lock): the
 * hot session leaves, the cartridge is made resident and injected (rows
 * 0..T-1, position T; its time counts as restore_ms), and the session's
 * journal holds its rows, inexact (they are no cold prefill of tokens): no
 * PREFIX capsule is planned or taken. A session (not the anonymous one)
 * is bound to the cartridge. */
static int gen_plan_cartridge(frt_gen_run *r)
{
    frt_service *s = r->s;
    frt_session *sess = r->sess;
    frt_gen_result *res = r->res;
    const frt_gen_request *rq = r->rq;
    const int T = rq->cartridge ? rq->cartridge_tokens : sess->cart.tokens;
    if (s->hot != sess) displace(s);
    s->hot = NULL;
    double tr = frt_service_now();
    int rc = frt_gen_cartridge_inject(r);
    res->restore_ms = 1e3 * (frt_service_now() - tr);
    if (!rc) rc = frt_session_set_journal(sess, r->ids, T);
    if (!rc && !sess->anonymous && !sess->cart.id[0])
        rc = frt_session_set_cartridge(sess, rq->cartridge_name, rq->cartridge_key, T, rq->cartridge_start,
                                       rq->n_cartridge_start);
    if (rc) {
        frt_gen_cartridge_release(r);
        sess->n = 0;
        return rc;
    }
    memset(&r->plan, 0, sizeof r->plan);
    r->plan.action = FRT_PREFIX_REBUILD;
    r->plan.start = T;
    sess->pending = -1;
    sess->exact = 0;
    s->hot = sess;
    s->hot_dirty = 1;
    res->action = FRT_PREFIX_REBUILD;
    res->prompt_tokens = r->n;
    res->cached_tokens = T;
    res->prefill_tokens = r->n - T;
    res->cartridge_tokens = T;
    sess->busy = 1;
    if (rq->session_id) snprintf(res->session_id, sizeof res->session_id, "%s", sess->id);
    return 0;
}

/* The end of the prefill piece that starts at pos < n: the next multiple
 * of the piece size P, or n, or a pin or auto capsule boundary before it. */
static int piece_end(const frt_request_plan *plan, int pos, int P, int n)
{
    int end = (pos / P + 1) * P;
    if (end > n) end = n;
    if (plan->pin_at > pos && plan->pin_at < end) end = plan->pin_at;
    if (plan->auto_at > pos && plan->auto_at < end) end = plan->auto_at;
    return end;
}

/* The end of the first prefill piece after a restore at plan->start, when
 * the restore may run it in the same call (frt_registry_restore_prefill):
 * no pin or auto capsule is due at the start, the request is neither
 * cancelled nor past its deadline. 0 otherwise. */
static int first_piece_end(frt_gen_run *r)
{
    const frt_request_plan *plan = &r->plan;
    const int pos = plan->start;
    if (pos >= r->n || plan->pin_at == pos || plan->auto_at == pos) return 0;
    if (frt_gen_cancelled(r->rq, &r->q.em) || frt_gen_past_deadline(r)) return 0;
    return piece_end(plan, pos, r->s->p.prefill_piece, r->n);
}

/* Step 1 (under the lock): plan, then move the live state to the plan's
 * start (restore, or reset for a rebuild; a restore that fails becomes a
 * rebuild) and make the session hot. A restore from the device tier runs
 * the first prefill piece in the same call where the engine can
 * (frt_capsule_restore_prefill: the bytes of the two calls). */
static int gen_plan(frt_gen_run *r)
{
    frt_service *s = r->s;
    frt_session *sess = r->sess;
    frt_gen_result *res = r->res;
    const int bound = !sess->anonymous && sess->cart.id[0];
    if (r->rq->cartridge && !bound) return gen_plan_cartridge(r);
    const int C = s->e->facts.prefill_chunk, n = r->n;
    uint64_t *stored = malloc((size_t)(sess->n_ckpts + 1) * sizeof *stored);
    if (!stored) return frt_error(FRT_ERR_OUT_OF_MEMORY, "generate");
    int n_stored = 0;
    if (sess->capsule) stored[n_stored++] = sess->capsule;
    for (int i = 0; i < sess->n_ckpts; i++) stored[n_stored++] = sess->ckpts[i].capsule;
    frt_request_plan_input in = {r->ids, n, sess->salt, sess->salt_len, r->rq->pin_len,
                                 s->p.auto_capsules && !bound, sess->anonymous, s->hot == sess, sess->journal,
                                 sess->n, sess->exact, stored, n_stored, bound};
    int rc = frt_request_plan_make(s->reg, C, &in, &r->plan);
    free(stored);
    if (rc) return rc;
    if (bound && r->plan.action == FRT_PREFIX_REBUILD) return gen_plan_cartridge(r); /* its state was lost */
    frt_request_plan *plan = &r->plan;
    if (plan->action != FRT_PREFIX_APPEND) {
        if (s->hot != sess) displace(s);
        s->hot = NULL;
    }
    if (plan->action == FRT_PREFIX_RESTORE) {
        double tr = frt_service_now();
        const int end = first_piece_end(r);
        int prefilled = 0;
        rc = end ? frt_registry_restore_prefill(s->reg, plan->capsule, r->ids + plan->start, end - plan->start,
                                                &prefilled)
                 : frt_registry_restore(s->reg, plan->capsule, NULL);
        res->restore_ms = 1e3 * (frt_service_now() - tr);
        const frt_cap *c = rc ? NULL : frt_registry_get(s->reg, plan->capsule);
        if (c) {
            res->restored = c->id;
            frt_session_set_journal(sess, c->tokens, c->position);
            sess->pending = c->pending;
            sess->exact = c->exact;
            if (prefilled) { /* the first piece went in with the restore */
                for (int i = plan->start; i < end; i++) frt_session_append(sess, r->ids[i]);
                sess->pending = -1;
                sess->exact = plan->exact;
                r->pos0 = end;
            }
        } else {
            /* the capsule could not be restored: a cold rebuild is always exact */
            s->m.restore_failures++;
            if (bound) return gen_plan_cartridge(r);
            plan->action = FRT_PREFIX_REBUILD;
            plan->capsule = 0;
            plan->start = 0;
            plan->start_exact = plan->exact = 1;
            if (s->p.auto_capsules && !plan->auto_at && n / C * C > plan->pin_at) plan->auto_at = n / C * C;
        }
    }
    if (plan->action == FRT_PREFIX_REBUILD) {
        s->e->reset(s->e->self);
        sess->n = 0;
        sess->pending = -1;
        sess->exact = 1;
    }
    s->hot = sess;
    s->hot_dirty = 1;
    if (plan->pin_existing && frt_registry_pin(s->reg, plan->pin_existing, 1) == 0) res->pinned = plan->pin_existing;
    res->pin_unavailable = plan->pin_unavailable;
    res->action = plan->action;
    res->prompt_tokens = n;
    res->cached_tokens = plan->start;
    res->prefill_tokens = n - plan->start;
    if (bound) res->cartridge_tokens = sess->cart.tokens;
    sess->busy = 1;
    if (r->rq->session_id) snprintf(res->session_id, sizeof res->session_id, "%s", sess->id);
    return 0;
}

/* Step 2: prefill start..n-1 in pieces cut at absolute multiples of the
 * piece size (multiples of C: the same operations as one call), stopping at
 * the pin and auto capsule boundaries to snapshot there. */
static int gen_prefill(frt_gen_run *r)
{
    frt_service *s = r->s;
    frt_engine *e = s->e;
    frt_session *sess = r->sess;
    const frt_request_plan *plan = &r->plan;
    const int P = s->p.prefill_piece, n = r->n;
    int rc = 0;
    r->pos = r->pos0 > plan->start ? r->pos0 : plan->start;
    if (e->position(e->self) != r->pos)
        rc = frt_error(FRT_ERR_STATE, "generate: the live state holds %d tokens, the plan expects %d",
                       e->position(e->self), r->pos);
    double tp = frt_service_now();
    while (!rc) {
        int pos = r->pos;
        if ((plan->pin_at && pos == plan->pin_at) || (plan->auto_at && pos == plan->auto_at)) {
            int pin = plan->pin_at && pos == plan->pin_at;
            frt_cap_spec spec = {FRT_CAP_PREFIX, s->p.displace_tier, sess->journal, sess->n, -1, 1,
                                 sess->salt, sess->salt_len, pin, NULL};
            uint64_t id = 0;
            pthread_mutex_lock(&s->mu);
            if (frt_registry_snapshot(s->reg, &spec, &id) == 0) {
                if (pin) r->res->pinned = id;
            } else {
                s->m.snapshot_failures++;
            }
            pthread_mutex_unlock(&s->mu);
        }
        if (pos >= n || frt_gen_cancelled(r->rq, &r->q.em)) break;
        if (frt_gen_past_deadline(r)) { /* the prompt is not all in: no token, finish "length" */
            r->q.finish = "length";
            r->res->time_limited = 1;
            break;
        }
        const int end = piece_end(plan, pos, P, n);
        rc = e->prefill(e->self, r->ids + pos, end - pos);
        if (rc) break;
        pthread_mutex_lock(&s->mu);
        for (int i = pos; i < end; i++) frt_session_append(sess, r->ids[i]);
        sess->pending = -1;
        sess->exact = plan->exact;
        pthread_mutex_unlock(&s->mu);
        r->pos = end;
    }
    r->res->prefill_ms = 1e3 * (frt_service_now() - tp);
    r->res->prefill_tokens = r->pos - plan->start;
    return rc;
}

/* sampling.logprobs: the record of the step that produced q's last token. */
static int take_logprobs(frt_gen_run *r, frt_gen_seq *q)
{
    frt_engine *e = r->s->e;
    if (!r->rq->sampling.logprobs) return 0;
    if (q->k > q->lp_cap) {
        int nc = q->lp_cap ? 2 * q->lp_cap : 64;
        frt_logprobs *nl = realloc(q->lp, (size_t)nc * sizeof *nl);
        if (!nl) return frt_error(FRT_ERR_OUT_OF_MEMORY, "generate: logprobs");
        q->lp = nl;
        q->lp_cap = nc;
    }
    return e->logprobs(e->self, &q->lp[q->k - 1]);
}

/* Streams the records of tokens [lp_sent, upto) (on_logprobs). */
static void send_logprobs(frt_gen_run *r, frt_gen_seq *q, int upto)
{
    const frt_gen_request *rq = r->rq;
    if (!rq->on_logprobs || !rq->sampling.logprobs || upto <= q->lp_sent || q->em.stop_cb) return;
    if (rq->on_logprobs(rq->user, r->s->e, q->lp + q->lp_sent, q->lp_sent, upto - q->lp_sent))
        q->em.stop_cb = 1;
    q->lp_sent = upto;
}

/* Step 3: the first token from the prompt's logits, then decode steps; each
 * token is committed (fed) before the next is produced, the last stays
 * pending. Streamed text never runs ahead of the committed tokens. */
static int gen_decode(frt_gen_run *r)
{
    frt_service *s = r->s;
    frt_engine *e = s->e;
    frt_session *sess = r->sess;
    const frt_gen_request *rq = r->rq;
    frt_gen_seq *q = &r->q;
    const int max_gen = frt_gen_max_tokens(r);
    if (r->pos != r->n || frt_gen_cancelled(rq, &q->em)) return 0;
    if (frt_gen_past_deadline(r)) {
        q->finish = "length";
        r->res->time_limited = 1;
        return 0;
    }
    int32_t tok;
    if (rq->has_seed) e->seed(e->self, rq->seed);
    frt_gen_grammar gg; /* the request's grammar, if any: a mask before each step */
    int none = 0;
    int rc = frt_gen_grammar_begin(&gg, e, rq);
    if (!rc) rc = frt_gen_grammar_mask(&gg, &none);
    if (!rc) rc = e->sample(e->self, &rq->sampling, &tok);
    if (!rc) {
        r->res->ttft_ms = 1e3 * (frt_service_now() - r->t0);
        rc = frt_gen_seq_push(q, tok);
    }
    if (!rc) rc = take_logprobs(r, q);
    if (!rc) rc = frt_gen_grammar_accept(&gg, tok);
    if (!rc) {
        pthread_mutex_lock(&s->mu);
        sess->pending = tok;
        pthread_mutex_unlock(&s->mu);
    }
    while (!rc && !frt_gen_seq_done(r, q, max_gen)) {
        int32_t last = q->g[q->k - 1];
        rc = frt_gen_grammar_mask(&gg, &none);
        if (!rc && none) { /* the grammar's output ended (an end id taken under ignore_eos) */
            q->finish = "stop";
            break;
        }
        if (!rc) rc = e->decode(e->self, &rq->sampling, &tok);
        if (!rc) rc = frt_gen_seq_push(q, tok);
        if (!rc) rc = take_logprobs(r, q);
        if (!rc) rc = frt_gen_grammar_accept(&gg, tok);
        if (rc) break;
        pthread_mutex_lock(&s->mu);
        frt_session_append(sess, last);
        sess->pending = tok;
        sess->exact = 0;
        pthread_mutex_unlock(&s->mu);
        send_logprobs(r, q, q->k - 1);
        frt_gen_emit_committed(&q->em, q->g, q->k - 1);
    }
    r->res->masks = gg.masks;
    r->res->mask_ms = gg.ms;
    frt_gen_grammar_end(&gg);
    r->generated = q->k;
    return rc;
}

/* The records of the returned tokens (all but a final end-of-sequence id)
 * into res; the last ones streamed. */
static void gen_logprobs_result(frt_gen_run *r, frt_gen_seq *q)
{
    if (!r->rq->sampling.logprobs || !q->lp) return;
    const int n = q->k - q->eos_tail;
    if (!frt_gen_cancelled(r->rq, &q->em)) send_logprobs(r, q, n);
    r->res->logprobs = q->lp;
    r->res->n_logprobs = n;
    r->res->lp_engine = r->s->e;
    q->lp = NULL;
}

int frt_gen_seq_text(frt_gen_run *r, frt_gen_seq *q, char **text, size_t *text_len)
{
    frt_engine *e = r->s->e;
    int rc = 0;
    *text = NULL;
    *text_len = 0;
    if (q->k > 0) {
        char *t = NULL;
        size_t len = 0;
        rc = e->detokenize(e->self, q->g, (size_t)(q->k - q->eos_tail), &t, &len);
        if (!rc) {
            size_t cut = q->stopped && q->stop_at < len ? q->stop_at : len;
            if (q->em.emitted > cut) q->em.emitted = cut;
            if (!frt_gen_cancelled(r->rq, &q->em)) emit(&q->em, t, q->em.emitted, cut);
            *text = frt_utf8_sanitize(t, cut, text_len);
            if (!*text) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "generate");
            free(t);
        }
    }
    if (!rc && frt_gen_cancelled(r->rq, &q->em)) {
        q->finish = "cancelled";
        r->res->time_limited = 0;
    }
    if (!rc && !*text && !(*text = calloc(1, 1))) rc = frt_error(FRT_ERR_OUT_OF_MEMORY, "generate");
    return rc;
}

/* Step 5 (under the lock): the session's bookkeeping and the metrics. */
static void gen_account(frt_gen_run *r, int rc)
{
    frt_service *s = r->s;
    frt_session *sess = r->sess;
    frt_gen_result *res = r->res;
    const frt_request_plan *plan = &r->plan;
    sess->busy = 0;
    sess->requests++;
    res->position = sess->n;
    frt_gen_cartridge_release(r);
    if (r->rq->cartridge && sess->anonymous) { /* the injected rows are never reused: the next request starts afresh */
        if (s->hot == sess) s->hot = NULL;
        sess->n = 0;
        sess->pending = -1;
        sess->exact = 1; /* an empty journal */
    }
    /* the boundary moved past the session's capsule */
    if (r->pos > plan->start || plan->action == FRT_PREFIX_REBUILD) drop_ref(s, &sess->capsule, sess->pinned);
    else if (plan->action == FRT_PREFIX_RESTORE && res->restored == sess->capsule) s->hot_dirty = 0;
    if (rc) {
        s->m.failed++;
        return;
    }
    s->m.requests[plan->action]++;
    if (!strcmp(res->finish_reason, "cancelled")) s->m.cancelled++;
    if (res->time_limited) s->m.time_limited++;
    s->m.prompt_tokens += (uint64_t)r->n;
    s->m.cached_tokens += (uint64_t)plan->start;
    s->m.prefill_tokens += (uint64_t)(r->pos - plan->start);
    s->m.generated_tokens += (uint64_t)r->generated;
    s->m.restore_ms_sum += res->restore_ms;
    if (r->generated > 0) {
        double t = res->ttft_ms / 1e3;
        s->m.ttft_sum += t;
        for (int b = 0; b < FRT_TTFT_BUCKETS; b++)
            if (t <= frt_ttft_bounds[b]) s->m.ttft_count[b]++;
    }
}

int frt_service_generate(frt_service *s, const frt_gen_request *rq, frt_gen_result *res)
{
    if (!s || !rq || !res) return frt_error(FRT_ERR_INVALID_ARGUMENT, "generate: NULL argument");
    memset(res, 0, sizeof *res);
    if (rq->max_tokens < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "max_tokens must be at least 1");
    if (!rq->text && (rq->n_ids < 1 || !rq->ids)) return frt_error(FRT_ERR_INVALID_ARGUMENT, "the prompt is empty");
    if (s->p.max_tokens_cap > 0 && rq->max_tokens > s->p.max_tokens_cap && !rq->clamp_max_tokens) {
        res->error_param = "max_tokens";
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "max_tokens %d is above this server's limit of %d tokens per request",
                         rq->max_tokens, s->p.max_tokens_cap);
    }


    frt_gen_run r;
    memset(&r, 0, sizeof r);
    r.s = s;
    r.rq = rq;
    r.res = res;
    r.t0 = rq->t_arrival > 0 ? rq->t_arrival : frt_service_now();
    r.q.finish = "cancelled";
    r.q.em = (frt_emitter){s, rq, 0, 0, -1};
    pthread_mutex_lock(&s->mu);
    r.sess = rq->session_id ? frt_sessions_find(&s->sessions, rq->session_id) : s->anon;
    pthread_mutex_unlock(&s->mu);
    if (!r.sess) return frt_error(FRT_ERR_NOT_FOUND, "no session '%s'", rq->session_id);
    pthread_mutex_lock(&s->mu);
    int crc = frt_gen_cartridge_check(&r);
    pthread_mutex_unlock(&s->mu);
    FRT_TRY(crc);
    FRT_TRY(frt_gen_branches_check(s, rq, res));
    FRT_TRY(frt_gen_grammar_check(s, rq, res));
    const int forked = (rq->n > 1 || rq->best_of > 1);
    if (forked && rq->sampling.logprobs) {
        res->error_param = "logprobs";
        return frt_error(FRT_ERR_UNSUPPORTED, "logprobs with n or best_of > 1 is not supported");
    }

    int rc = gen_prompt(&r);
    if (!rc) {
        pthread_mutex_lock(&s->mu);
        rc = gen_plan(&r);
        pthread_mutex_unlock(&s->mu);
    }
    if (rc) {
        free(r.ids);
        return rc;
    }
    if (rq->on_start) rq->on_start(rq->user, res);
    rc = gen_prefill(&r);
    if (!rc) rc = forked ? frt_gen_branches(&r) : gen_decode(&r);
    if (!rc && !forked) rc = frt_gen_seq_text(&r, &r.q, &res->text, &res->text_len);
    if (!rc && !forked) gen_logprobs_result(&r, &r.q);
    free(r.q.lp);
    res->tokens = r.q.g;
    res->n_tokens = r.q.k;
    res->completion_tokens = r.generated;
    res->finish_reason = forked && res->n_choices ? res->choices[0].finish_reason : r.q.finish;
    res->total_ms = 1e3 * (frt_service_now() - r.t0);
    pthread_mutex_lock(&s->mu);
    gen_account(&r, rc);
    pthread_mutex_unlock(&s->mu);
    free(r.ids);
    if (rc) {
        frt_gen_result_clear(res);
        return rc;
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
        if (par->cart.id[0])
            rc = frt_session_set_cartridge(c, par->cart.id, par->cart.key, par->cart.tokens, par->cart.start,
                                           par->cart.n_start);
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
