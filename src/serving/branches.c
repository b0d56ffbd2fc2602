/*
 * serving/branches.c - a completion forked into choices (OpenAI n and
 * best_of, docs/serving.md "Choices: n and best_of"): the prompt is
 * prefilled once by the single-sequence steps of service.c, its boundary
 * is snapshotted (device tier) and forked into best_of branch slots
 * (frt/branch.h through the engine's branch entries), every live branch is
 * stepped together until each one stops, and the n branches with the
 * highest cumulative logprob become res->choices.
 *
 * A branch's logprob is the sum over its tokens of log_softmax(logits)[t]
 * of the model's raw logits (temperature 1, before top-k / top-p: the
 * engine's logprob entry), the same quantity whatever the sampling.
 * Branch i samples with frt_branch_seed(fork_seed, i): a single-branch
 * request with that seed gives branch i's tokens.
 */
#include "serving/service_int.h"

#include "frt/branch.h"
#include "util/error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int frt_gen_branches_check(const frt_service *s, const frt_gen_request *rq, frt_gen_result *res)
{
    const int n = rq->n ? rq->n : 1, B = rq->best_of ? rq->best_of : n;
    const int slots = s->e->facts.branch_slots > 0 ? s->e->facts.branch_slots : 1;
    const char *what = rq->best_of > n ? "best_of" : "n";
    res->error_param = n < 1 ? "n" : "best_of";
    if (n < 1) return frt_error(FRT_ERR_INVALID_ARGUMENT, "'n' must be at least 1 (got %d)", rq->n);
    if (B < n) return frt_error(FRT_ERR_INVALID_ARGUMENT, "'best_of' (%d) must be at least 'n' (%d)", B, n);
    if (rq->on_choice_text && B != n)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "'best_of' above 'n' cannot be streamed");
    res->error_param = what;
    if (B > slots)
        return frt_error(FRT_ERR_INVALID_ARGUMENT,
                         "'%s' = %d needs %d branch slots; this server has %d (start it with frt serve --branches %d)",
                         what, B, B, slots, B);
    res->error_param = NULL;
    return 0;
}

void frt_gen_choices_free(frt_gen_result *res)
{
    for (int i = 0; i < res->n_choices; i++) {
        free(res->choices[i].text);
        free(res->choices[i].tokens);
    }
    free(res->choices);
    res->choices = NULL;
    res->n_choices = 0;
}

/* A seed for a request without one: the clock mixed with a counter. */
static uint64_t draw_seed(void)
{
    static uint64_t counter;
    uint64_t x = (uint64_t)(frt_service_now() * 1e9) ^ (++counter * 0x9e3779b97f4a7c15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    return x ^ (x >> 33);
}

/* The tokens of one step: each live branch's token joins its sequence with
 * its logprob, and its committed text is streamed. */
static int take_step(frt_gen_run *r, frt_gen_seq *q, int B, const int32_t *toks)
{
    frt_engine *e = r->s->e;
    for (int i = 0; i < B; i++) {
        if (toks[i] < 0) continue;
        double lp = 0;
        FRT_TRY(e->branch_select(e->self, i));
        FRT_TRY(e->logprob(e->self, toks[i], &lp));
        FRT_TRY(frt_gen_seq_push(&q[i], toks[i]));
        q[i].logprob += lp;
        r->generated++;
        frt_gen_emit_committed(&q[i].em, q[i].g, q[i].k - 1);
    }
    return 0;
}

/* Stops the branches that are done; the number still live, or an error. */
static int stop_done(frt_gen_run *r, frt_gen_seq *q, int B, int max_gen)
{
    frt_engine *e = r->s->e;
    int live = 0;
    for (int i = 0; i < B; i++) {
        if (!q[i].live) continue;
        if (frt_gen_seq_done(r, &q[i], max_gen)) {
            q[i].live = 0;
            FRT_TRY(e->branch_stop(e->self, i));
        } else {
            live++;
        }
    }
    return live;
}

/* The session follows branch 0 (slot 0 holds it): its tokens but the last
 * are committed, the last is pending. */
static void follow_branch0(frt_gen_run *r, const frt_gen_seq *q0)
{
    frt_service *s = r->s;
    if (q0->k < 1) return;
    pthread_mutex_lock(&s->mu);
    for (int j = 0; j + 1 < q0->k; j++) frt_session_append(r->sess, q0->g[j]);
    r->sess->pending = q0->g[q0->k - 1];
    if (q0->k > 1) r->sess->exact = 0;
    pthread_mutex_unlock(&s->mu);
}

/* Fork, first tokens, then decode steps until no branch is live. */
static int run_fork(frt_gen_run *r, frt_gen_seq *q, int B, int32_t *toks)
{
    frt_engine *e = r->s->e;
    const frt_sampling *sp = &r->rq->sampling;
    const int max_gen = frt_gen_max_tokens(r);
    void *cap = NULL;
    int rc = e->snapshot(e->self, FRT_ENGINE_TIER_DEVICE, NULL, NULL, 0, &cap);
    if (!rc) {
        rc = e->fork(e->self, cap, B, r->res->fork_seed);
        e->capsule_free(e->self, cap);
    }
    if (!rc) rc = e->branch_sample(e->self, sp, toks);
    if (!rc) {
        r->res->ttft_ms = 1e3 * (frt_service_now() - r->t0);
        for (int i = 0; i < B; i++) q[i].live = 1;
        rc = take_step(r, q, B, toks);
    }
    while (!rc) {
        int live = stop_done(r, q, B, max_gen);
        if (live <= 0) {
            rc = live;
            break;
        }
        rc = e->branch_decode(e->self, sp, toks);
        if (!rc) rc = take_step(r, q, B, toks);
    }
    int src = e->branch_select(e->self, 0);
    follow_branch0(r, &q[0]);
    return rc ? rc : src;
}

/* Order of the returned branches: by cumulative logprob, highest first
 * (ties: the lower branch), when best_of > n; branch order otherwise. */
static void rank(const frt_gen_seq *q, int B, int *order, int sorted)
{
    for (int i = 0; i < B; i++) order[i] = i;
    if (!sorted) return;
    for (int i = 1; i < B; i++)
        for (int j = i; j > 0 && q[order[j]].logprob > q[order[j - 1]].logprob; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
}

/* res->choices from the n best branches (their tokens move there). */
static int collect(frt_gen_run *r, frt_gen_seq *q, int B, int n, int *order)
{
    frt_gen_result *res = r->res;
    rank(q, B, order, B > n);
    if (!(res->choices = calloc((size_t)n, sizeof *res->choices))) return frt_error(FRT_ERR_OUT_OF_MEMORY, "generate");
    for (int j = 0; j < n; j++) {
        frt_gen_seq *b = &q[order[j]];
        frt_gen_choice *c = &res->choices[j];
        res->n_choices = j + 1;
        FRT_TRY(frt_gen_seq_text(r, b, &c->text, &c->text_len));
        c->tokens = b->g;
        c->n_tokens = b->k;
        b->g = NULL;
        c->finish_reason = b->finish;
        c->logprob = b->logprob;
        c->branch = order[j];
        c->seed = frt_branch_seed(res->fork_seed, order[j]);
    }
    return 0;
}

int frt_gen_branches(frt_gen_run *r)
{
    const frt_gen_request *rq = r->rq;
    const int n = rq->n > 1 ? rq->n : 1, B = rq->best_of > n ? rq->best_of : n;
    frt_gen_seq *q = calloc((size_t)B, sizeof *q);
    int32_t *toks = calloc((size_t)B, sizeof *toks);
    int *order = calloc((size_t)B, sizeof *order);
    int rc = q && toks && order ? 0 : frt_error(FRT_ERR_OUT_OF_MEMORY, "generate");
    r->res->fork_seed = rq->has_seed ? rq->seed : draw_seed();
    r->res->n_branches = B;
    for (int i = 0; !rc && i < B; i++) {
        q[i].finish = "cancelled";
        q[i].em = (frt_emitter){r->s, rq, 0, 0, B == n ? i : -2};
    }
    if (!rc && r->pos == r->n && !frt_gen_cancelled(rq, &r->q.em)) {
        if (frt_gen_past_deadline(r)) {
            r->res->time_limited = 1;
            for (int i = 0; i < B; i++) q[i].finish = "length";
        } else {
            rc = run_fork(r, q, B, toks);
        }
    } else if (!rc && r->q.finish != NULL && !strcmp(r->q.finish, "length")) {
        for (int i = 0; i < B; i++) q[i].finish = "length"; /* the prefill ran out of time */
    }
    if (!rc) rc = collect(r, q, B, n, order);
    for (int i = 0; q && i < B; i++) free(q[i].g);
    free(q);
    free(toks);
    free(order);
    return rc;
}
