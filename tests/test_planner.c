/*
 * test_planner.c - prefix planning and its execution by the serving core,
 * over the fake engine (whose state hash also encodes prefill split points
 * and decoded tokens, so a plan that breaks exactness changes the tokens):
 *   - plan decisions: rebuild / append / restore, longest match, ties,
 *     salts, the pending token, pinning (existing, mid-prefill, rerouted),
 *     auto capsules;
 *   - exactness: a restore turn equals a cold prefill of the same prompt (and
 *     from the device tier runs the restore and its first piece as one
 *     call, with the tokens of the two calls); an
 *     append turn after displacement equals the session never displaced;
 *     fork branches and rollback replay the same tokens (also sampled);
 *   - the coding-agent scenario: after the first request every request
 *     restores or appends;
 *   - streaming, stop strings, cancellation, text-level continuation,
 *     restart persistence, budget starvation, bad input.
 */
#include "frt_test.h"

#include "serving/planner.h"
#include "serving/service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { C = 64 };

static frt_engine *make_engine(void)
{
    frt_engine_fake_params p = frt_engine_fake_default_params();
    p.prefill_chunk = C;
    p.max_seq = 2048;
    frt_engine *e = NULL;
    if (frt_engine_fake_create(&p, &e)) {
        fprintf(stderr, "fake engine: %s\n", frt_last_error());
        exit(1);
    }
    return e;
}

static frt_service *make_service(frt_engine *e, const char *dir)
{
    frt_service_params p = frt_service_default_params();
    p.capsule_dir = dir;
    frt_service *s = NULL;
    if (frt_service_create(e, &p, &s)) {
        fprintf(stderr, "service: %s\n", frt_last_error());
        exit(1);
    }
    return s;
}

/* A deterministic "text" of n printable characters (no 't' so the fake
 * tokenizer's "th" merge never fires: one token per byte). */
static char *make_text(int n, int seed)
{
    char *t = malloc((size_t)n + 1);
    for (int i = 0; i < n; i++) {
        char c = (char)('a' + (i * 7 + seed * 11 + i / 5) % 19); /* a..s */
        t[i] = c;
    }
    t[n] = 0;
    return t;
}

static char *concat(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *r = malloc(la + lb + 1);
    memcpy(r, a, la);
    memcpy(r + la, b, lb + 1);
    return r;
}

typedef struct run {
    frt_gen_result res;
    int rc;
} run;

static run gen(frt_service *s, const char *session, const char *prompt, int max_tokens, int pin_len)
{
    frt_gen_request rq;
    memset(&rq, 0, sizeof rq);
    rq.session_id = session;
    rq.text = prompt;
    rq.text_len = strlen(prompt);
    rq.max_tokens = max_tokens;
    rq.pin_len = pin_len;
    run r;
    r.rc = frt_service_generate(s, &rq, &r.res);
    return r;
}

static int same_tokens(const frt_gen_result *a, const frt_gen_result *b)
{
    return a->n_tokens == b->n_tokens && a->n_tokens > 0 &&
           !memcmp(a->tokens, b->tokens, (size_t)a->n_tokens * sizeof *a->tokens);
}

/* ---- plan decisions (pure) ------------------------------------------------------- */

static void ids_of(int32_t *ids, int n, int seed)
{
    for (int i = 0; i < n; i++) ids[i] = 40 + (i * 3 + seed) % 50;
}

static void test_plan_decisions(void)
{
    frt_engine *e = make_engine();
    frt_registry_params rp = {{0, (size_t)1 << 30, 0}, NULL};
    frt_registry *r = NULL;
    CHECK_OK(frt_registry_open(e, &rp, &r));
    int32_t ids[600];
    ids_of(ids, 600, 1);
    frt_request_plan_input in;
    memset(&in, 0, sizeof in);
    in.ids = ids;
    in.n = 300;
    in.auto_capsules = 1;
    frt_request_plan p;

    /* nothing: rebuild, auto capsule at the aligned length */
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.action == FRT_PREFIX_REBUILD && p.start == 0 && p.exact && p.auto_at == 256 && p.pin_at == 0);

    /* the hot session's journal is a prefix: append */
    in.hot_usable = 1;
    in.hot = ids;
    in.hot_n = 137;
    in.hot_exact = 0;
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.action == FRT_PREFIX_APPEND && p.start == 137 && !p.exact && p.auto_at == 0);
    /* not a prefix (the client edited history): rebuild */
    int32_t edited[300];
    memcpy(edited, ids, sizeof edited);
    edited[100] ^= 1;
    in.ids = edited;
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.action == FRT_PREFIX_REBUILD);
    in.ids = ids;
    /* the prompt is exactly the journal: at least one token must be prefilled */
    in.n = 137;
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.action == FRT_PREFIX_REBUILD);
    /* the pending token resent: one token to prefill */
    in.n = 138;
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.action == FRT_PREFIX_APPEND && p.start == 137);
    in.n = 300;

    /* shared prefix capsules: the longest wins over a shorter append */
    e->reset(e->self);
    CHECK_OK(e->prefill(e->self, ids, 128));
    frt_cap_spec spec = {FRT_CAP_PREFIX, FRT_ENGINE_TIER_HOST, ids, 128, -1, 1, NULL, 0, 0, NULL};
    uint64_t p128 = 0, p192 = 0, p256 = 0;
    CHECK_OK(frt_registry_snapshot(r, &spec, &p128));
    CHECK_OK(e->prefill(e->self, ids + 128, 64));
    spec.n = 192;
    CHECK_OK(frt_registry_snapshot(r, &spec, &p192));
    in.hot_n = 100;
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.action == FRT_PREFIX_RESTORE && p.capsule == p192 && p.start == 192 && p.exact);
    CHECK(p.auto_at == 256);
    /* a longer append beats it */
    in.hot_n = 200;
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.action == FRT_PREFIX_APPEND && p.start == 200);
    /* a tie goes to append (no copy) */
    in.hot_n = 192;
    in.hot_exact = 1;
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.action == FRT_PREFIX_APPEND && p.start == 192 && p.exact && p.auto_at == 256);
    /* sessionless requests (exact_only) never extend a state that is not cold-exact and aligned */
    in.exact_only = 1;
    in.hot_n = 200;
    in.hot_exact = 1; /* exact but not aligned: prefill from 200 splits differently from a cold prefill */
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.action == FRT_PREFIX_RESTORE && p.capsule == p192 && p.exact);
    in.hot_n = 192;
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.action == FRT_PREFIX_APPEND && p.start == 192 && p.exact);
    in.hot_exact = 0;
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.action == FRT_PREFIX_RESTORE && p.capsule == p192);
    in.exact_only = 0;
    in.hot_usable = 0;

    /* salts isolate: a salted request does not see unsalted capsules */
    in.salt = "tenant";
    in.salt_len = 6;
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.action == FRT_PREFIX_REBUILD);
    in.salt = NULL;
    in.salt_len = 0;

    /* pin: an existing capsule at the aligned length is pinned */
    in.pin_len = 150; /* aligned: 128 */
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.pin_existing == p128 && p.pin_at == 0 && p.action == FRT_PREFIX_RESTORE && p.capsule == p192);
    /* pin: none there yet: snapshot mid-prefill, from the longest exact start below it */
    in.pin_len = -1; /* the whole prompt: 256 */
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.pin_at == 256 && p.pin_existing == 0 && p.capsule == p192 && p.auto_at == 0);
    /* pin: a non-exact append is rerouted through an exact path */
    in.hot_usable = 1;
    in.hot_n = 280;
    in.hot_exact = 0;
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.action == FRT_PREFIX_RESTORE && p.capsule == p192 && p.pin_at == 256);
    in.hot_usable = 0;
    /* pin shorter than C: unavailable, plan unchanged */
    in.pin_len = 40;
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.pin_unavailable && p.pin_at == 0 && p.capsule == p192);
    in.pin_len = 0;

    /* this session's stored capsules (boundary, checkpoints) */
    e->reset(e->self);
    CHECK_OK(e->prefill(e->self, ids, 250));
    frt_cap_spec ss = {FRT_CAP_SESSION, FRT_ENGINE_TIER_HOST, ids, 250, 77, 0, NULL, 0, 0, "s1"};
    uint64_t s250 = 0;
    CHECK_OK(frt_registry_snapshot(r, &ss, &s250));
    frt_registry_ref(r, s250, +1, 0);
    in.stored = &s250;
    in.n_stored = 1;
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.action == FRT_PREFIX_RESTORE && p.capsule == s250 && p.start == 250 && !p.exact && p.auto_at == 0);
    /* another session's capsule is never a candidate */
    in.n_stored = 0;
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.capsule == p192);
    /* auto capsules skip a length a capsule already holds */
    e->reset(e->self);
    CHECK_OK(e->prefill(e->self, ids, 256));
    spec.n = 256;
    CHECK_OK(frt_registry_snapshot(r, &spec, &p256));
    in.n = 256;
    CHECK_OK(frt_request_plan_make(r, C, &in, &p));
    CHECK(p.capsule == p192 && p.auto_at == 0);

    CHECK_STATUS(frt_request_plan_make(r, C, NULL, &p), FRT_ERR_INVALID_ARGUMENT);
    in.n = 0;
    CHECK_STATUS(frt_request_plan_make(r, C, &in, &p), FRT_ERR_INVALID_ARGUMENT);
    frt_registry_close(r);
    frt_engine_free(e);
}

/* ---- exactness through the service ----------------------------------------------- */

/* A restore turn equals a cold prefill of the same prompt on a fresh server. */
static void test_restore_equals_cold(void)
{
    char *prefix = make_text(300, 1), *q1 = make_text(40, 2), *q2 = make_text(50, 3);
    char *p1 = concat(prefix, q1), *p2 = concat(prefix, q2);
    frt_engine *ea = make_engine(), *eb = make_engine();
    frt_service *a = make_service(ea, NULL), *b = make_service(eb, NULL);

    run r1 = gen(a, NULL, p1, 8, 300);
    CHECK_OK(r1.rc);
    CHECK(r1.res.action == FRT_PREFIX_REBUILD && r1.res.pinned != 0 && r1.res.cached_tokens == 0);
    run r2 = gen(a, NULL, p2, 8, 0);
    CHECK_OK(r2.rc);
    CHECK(r2.res.action == FRT_PREFIX_RESTORE && r2.res.cached_tokens == 256 && r2.res.prefill_tokens == 94);
    CHECK(r2.res.restored == r1.res.pinned);
    run cold = gen(b, NULL, p2, 8, 0);
    CHECK_OK(cold.rc);
    CHECK(cold.res.action == FRT_PREFIX_REBUILD);
    CHECK(same_tokens(&r2.res, &cold.res));
    CHECK(!strcmp(r2.res.text, cold.res.text));

    /* the fake does see a wrong split: prefill 0..300 then the rest differs */
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(eb->tokenize(eb->self, p2, strlen(p2), &ids, &n));
    eb->reset(eb->self);
    CHECK_OK(eb->prefill(eb->self, ids, 300));
    CHECK_OK(eb->prefill(eb->self, ids + 300, (int)n - 300));
    int32_t t0 = -1;
    CHECK_OK(eb->sample(eb->self, NULL, &t0));
    int differs = t0 != cold.res.tokens[0];
    for (int i = 1; i < 8 && !differs; i++) {
        int32_t t;
        eb->decode(eb->self, NULL, &t);
        differs = t != cold.res.tokens[i];
    }
    CHECK(differs);
    free(ids);

    frt_gen_result_clear(&r1.res);
    frt_gen_result_clear(&r2.res);
    frt_gen_result_clear(&cold.res);
    frt_service_free(a);
    frt_service_free(b);
    frt_engine_free(ea);
    frt_engine_free(eb);
    free(prefix), free(q1), free(q2), free(p1), free(p2);
}

/* Capsules written to the device tier (displace_tier): a restore turn runs
 * the restore and its first prefill piece as one call of the engine
 * (frt_registry_restore_prefill), with the tokens of the two calls (an
 * engine without restore_prefill). With the default host tier the restore
 * runs alone (test_restore_equals_cold). */
static void test_restore_prefill_turn(void)
{
    char *prefix = make_text(300, 4), *q1 = make_text(40, 5), *q2 = make_text(50, 6);
    char *p1 = concat(prefix, q1), *p2 = concat(prefix, q2);
    frt_engine *e[2] = {make_engine(), make_engine()};
    e[1]->restore_prefill = NULL;
    run r[2];
    for (int k = 0; k < 2; k++) {
        frt_service_params p = frt_service_default_params();
        p.displace_tier = FRT_ENGINE_TIER_DEVICE;
        frt_service *s = NULL;
        CHECK_OK(frt_service_create(e[k], &p, &s));
        if (!s) return;
        run r1 = gen(s, NULL, p1, 8, 300);
        CHECK_OK(r1.rc);
        r[k] = gen(s, NULL, p2, 8, 0);
        CHECK_OK(r[k].rc);
        CHECK(r[k].res.action == FRT_PREFIX_RESTORE && r[k].res.cached_tokens == 256 && r[k].res.prefill_tokens == 94);
        frt_registry_stats st;
        frt_registry_stats_get(frt_service_registry(s), &st);
        CHECK_MSG(st.restore_prefills == (k == 0 ? 1u : 0u) && st.restores[FRT_ENGINE_TIER_DEVICE] == 1,
                  "engine %d: %llu restores in one call", k, (unsigned long long)st.restore_prefills);
        frt_gen_result_clear(&r1.res);
        frt_service_free(s);
    }
    CHECK(same_tokens(&r[0].res, &r[1].res) && !strcmp(r[0].res.text, r[1].res.text));
    frt_gen_result_clear(&r[0].res);
    frt_gen_result_clear(&r[1].res);
    frt_engine_free(e[0]);
    frt_engine_free(e[1]);
    free(prefix), free(q1), free(q2), free(p1), free(p2);
}

/* An append turn after displacement equals the session never displaced. The
 * next prompt resends the history: the pending token is its first new token. */
static void test_append_after_displacement(void)
{
    char *p1 = make_text(150, 4), *other = make_text(90, 5), *more = make_text(30, 6);
    frt_engine *ea = make_engine(), *eb = make_engine();
    frt_service *a = make_service(ea, NULL), *b = make_service(eb, NULL);
    char id[FRT_SESSION_ID_MAX];
    CHECK_OK(frt_service_session_create(a, "s1", NULL, 0, 0, id));
    CHECK_OK(frt_service_session_create(a, "s2", NULL, 0, 0, id));
    CHECK_OK(frt_service_session_create(b, "s1", NULL, 0, 0, id));

    run a1 = gen(a, "s1", p1, 6, 0), b1 = gen(b, "s1", p1, 6, 0);
    CHECK_OK(a1.rc);
    CHECK_OK(b1.rc);
    CHECK(same_tokens(&a1.res, &b1.res));
    CHECK(a1.res.position == 150 + 5); /* the last token is pending */
    run x = gen(a, "s2", other, 4, 0);  /* displaces s1 */
    CHECK_OK(x.rc);
    frt_service_metrics m;
    frt_service_metrics_get(a, &m);
    CHECK(m.displacements == 1);

    char *h1 = concat(p1, a1.res.text), *p2 = concat(h1, more);
    run a2 = gen(a, "s1", p2, 6, 0), b2 = gen(b, "s1", p2, 6, 0);
    CHECK_OK(a2.rc);
    CHECK_OK(b2.rc);
    CHECK(a2.res.action == FRT_PREFIX_RESTORE && a2.res.cached_tokens == 155);
    CHECK(b2.res.action == FRT_PREFIX_APPEND && b2.res.cached_tokens == 155);
    CHECK(a2.res.prefill_tokens == 31); /* the pending token + 30 */
    CHECK(same_tokens(&a2.res, &b2.res));
    /* s2 displaced in turn, and comes back by restore too */
    char *hx = concat(other, x.res.text), *px = concat(hx, "more");
    run x2 = gen(a, "s2", px, 4, 0);
    CHECK_OK(x2.rc);
    CHECK(x2.res.action == FRT_PREFIX_RESTORE && x2.res.cached_tokens == 90 + 3);

    frt_gen_result_clear(&a1.res), frt_gen_result_clear(&b1.res), frt_gen_result_clear(&x.res);
    frt_gen_result_clear(&a2.res), frt_gen_result_clear(&b2.res), frt_gen_result_clear(&x2.res);
    frt_service_free(a);
    frt_service_free(b);
    frt_engine_free(ea);
    frt_engine_free(eb);
    free(p1), free(other), free(more), free(h1), free(p2), free(hx), free(px);
}

/* Fork: branches replay the same continuation (greedy and seeded sampling). */
static void test_fork_rollback(void)
{
    char *p1 = make_text(120, 7), *more = make_text(20, 8);
    frt_engine *e = make_engine();
    frt_service *s = make_service(e, NULL);
    char id[FRT_SESSION_ID_MAX], kids[3][FRT_SESSION_ID_MAX];
    CHECK_OK(frt_service_session_create(s, "root", NULL, 0, 0, id));
    run r1 = gen(s, "root", p1, 5, 0);
    CHECK_OK(r1.rc);
    CHECK_OK(frt_service_session_fork(s, "root", 3, kids));
    CHECK(strcmp(kids[0], kids[1]) && strcmp(kids[1], kids[2]));
    char *h = concat(p1, r1.res.text), *p2 = concat(h, more);
    run k[3];
    for (int i = 0; i < 3; i++) {
        frt_gen_request rq;
        memset(&rq, 0, sizeof rq);
        rq.session_id = kids[i];
        rq.text = p2;
        rq.text_len = strlen(p2);
        rq.max_tokens = 6;
        rq.sampling.temperature = 0.8f;
        rq.sampling.top_p = 1;
        rq.has_seed = 1;
        rq.seed = 42;
        k[i].rc = frt_service_generate(s, &rq, &k[i].res);
        CHECK_OK(k[i].rc);
        CHECK(k[i].res.action == FRT_PREFIX_RESTORE && k[i].res.cached_tokens == 124);
    }
    CHECK(same_tokens(&k[0].res, &k[1].res) && same_tokens(&k[1].res, &k[2].res));
    /* the parent kept its state (still appendable) */
    run rp = gen(s, "root", p2, 6, 0);
    CHECK_OK(rp.rc);
    CHECK(rp.res.action == FRT_PREFIX_RESTORE || rp.res.action == FRT_PREFIX_APPEND);
    CHECK(rp.res.cached_tokens == 124);

    /* rollback: checkpoint, continue, roll back, the same turn again */
    CHECK_OK(frt_service_session_create(s, "rb", NULL, 0, 0, id));
    run q1 = gen(s, "rb", p1, 5, 0);
    CHECK_OK(q1.rc);
    uint64_t cap = 0;
    CHECK_OK(frt_service_checkpoint(s, "rb", "turn1", 1, &cap));
    CHECK(cap != 0);
    run q2 = gen(s, "rb", p2, 6, 0);
    CHECK_OK(q2.rc);
    CHECK(q2.res.action == FRT_PREFIX_APPEND);
    char *h2 = concat(p2, q2.res.text), *p3 = concat(h2, "and then");
    run q3 = gen(s, "rb", p3, 4, 0);
    CHECK_OK(q3.rc);
    CHECK_OK(frt_service_rollback(s, "rb", "turn1"));
    frt_service_lock(s);
    const frt_session *rb = frt_sessions_find(frt_service_sessions(s), "rb");
    CHECK(rb && rb->n == 124 && frt_service_hot(s) != rb);
    frt_service_unlock(s);
    run q2b = gen(s, "rb", p2, 6, 0);
    CHECK_OK(q2b.rc);
    CHECK(q2b.res.action == FRT_PREFIX_RESTORE && q2b.res.restored == cap);
    CHECK(same_tokens(&q2.res, &q2b.res));
    /* errors */
    CHECK_STATUS(frt_service_rollback(s, "rb", "nope"), FRT_ERR_NOT_FOUND);
    CHECK_STATUS(frt_service_rollback(s, "nope", "turn1"), FRT_ERR_NOT_FOUND);
    CHECK_STATUS(frt_service_checkpoint(s, "rb", "bad name!", 1, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_service_session_fork(s, "rb", 0, kids), FRT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(frt_service_session_fork(s, "nope", 1, kids), FRT_ERR_NOT_FOUND);
    CHECK_OK(frt_service_session_create(s, "empty", NULL, 0, 0, id));
    CHECK_STATUS(frt_service_checkpoint(s, "empty", "c", 1, NULL), FRT_ERR_STATE);
    /* deleting a session releases its capsules */
    CHECK_OK(frt_service_session_delete(s, "rb"));
    CHECK_STATUS(frt_service_session_delete(s, "rb"), FRT_ERR_NOT_FOUND);
    frt_service_lock(s);
    const frt_registry *reg = frt_service_registry(s);
    for (int i = 0; i < frt_registry_count(reg); i++) CHECK(strcmp(frt_registry_at(reg, i)->owner, "rb") != 0);
    frt_service_unlock(s);

    frt_gen_result_clear(&r1.res), frt_gen_result_clear(&rp.res);
    for (int i = 0; i < 3; i++) frt_gen_result_clear(&k[i].res);
    frt_gen_result_clear(&q1.res), frt_gen_result_clear(&q2.res), frt_gen_result_clear(&q3.res);
    frt_gen_result_clear(&q2b.res);
    frt_service_free(s);
    frt_engine_free(e);
    free(p1), free(more), free(h), free(p2), free(h2), free(p3);
}

/* The coding agent: many turns and fresh sessions sharing one large prefix.
 * After the first request, every request restores or appends. */
static void test_coding_agent(void)
{
    char *sys = make_text(700, 9);
    frt_engine *e = make_engine(), *ec = make_engine();
    frt_service *s = make_service(e, NULL), *cold = make_service(ec, NULL);
    char id[FRT_SESSION_ID_MAX];
    int rebuilds = 0, total = 0;
    char *hist[3] = {0};
    for (int turn = 0; turn < 4; turn++) {
        for (int a = 0; a < 3; a++) {
            char name[32];
            snprintf(name, sizeof name, "agent%d", a);
            if (turn == 0) CHECK_OK(frt_service_session_create(s, name, NULL, 0, 0, id));
            char *q = make_text(30 + 7 * a + turn, 20 + 3 * a + turn);
            char *prompt = concat(turn == 0 ? sys : hist[a], q);
            run r = gen(s, name, prompt, 5, turn == 0 && a == 0 ? (int)strlen(sys) : 0);
            CHECK_OK(r.rc);
            total++;
            if (total > 1) CHECK(r.res.action != FRT_PREFIX_REBUILD);
            rebuilds += r.res.action == FRT_PREFIX_REBUILD;
            if (turn == 0 && a > 0) {
                /* a fresh session's restore turn equals a cold prefill */
                CHECK(r.res.action == FRT_PREFIX_RESTORE && r.res.cached_tokens == 640);
                run c = gen(cold, NULL, prompt, 5, 0);
                CHECK_OK(c.rc);
                CHECK(c.res.action == FRT_PREFIX_REBUILD);
                CHECK(same_tokens(&r.res, &c.res));
                frt_gen_result_clear(&c.res);
            }
            free(hist[a]);
            hist[a] = concat(prompt, r.res.text);
            frt_gen_result_clear(&r.res);
            free(q);
            free(prompt);
        }
    }
    CHECK(rebuilds == 1);
    frt_service_metrics m;
    frt_service_lock(s);
    frt_service_metrics_get(s, &m);
    frt_service_unlock(s);
    CHECK(m.requests[FRT_PREFIX_REBUILD] == 1 && m.requests[FRT_PREFIX_APPEND] + m.requests[FRT_PREFIX_RESTORE] == 11);
    for (int a = 0; a < 3; a++) free(hist[a]);
    frt_service_free(s);
    frt_service_free(cold);
    frt_engine_free(e);
    frt_engine_free(ec);
    free(sys);
}

/* ---- streaming, stop strings, cancellation --------------------------------------- */

typedef struct sink {
    char buf[4096];
    size_t len;
    int pieces, cancel_after;
} sink;

static int on_text(void *user, const char *t, size_t n)
{
    sink *k = user;
    if (k->len + n < sizeof k->buf) memcpy(k->buf + k->len, t, n), k->len += n;
    k->pieces++;
    return k->cancel_after && k->pieces >= k->cancel_after;
}

static void test_stream_stop_cancel(void)
{
    char *p = make_text(100, 11);
    frt_engine *e = make_engine();
    frt_service *s = make_service(e, NULL);
    char id[FRT_SESSION_ID_MAX];
    CHECK_OK(frt_service_session_create(s, "st", NULL, 0, 0, id));

    /* reference: 40 tokens, no stop */
    run ref = gen(s, NULL, p, 40, 0);
    CHECK_OK(ref.rc);
    CHECK(!strcmp(ref.res.finish_reason, "length") && ref.res.n_tokens == 40);
    /* streaming: the pieces concatenate to the text */
    sink k = {{0}, 0, 0, 0};
    frt_gen_request rq;
    memset(&rq, 0, sizeof rq);
    rq.text = p;
    rq.text_len = strlen(p);
    rq.max_tokens = 40;
    rq.on_text = on_text;
    rq.user = &k;
    frt_gen_result res;
    CHECK_OK(frt_service_generate(s, &rq, &res));
    CHECK(k.len == res.text_len && !memcmp(k.buf, res.text, k.len) && k.pieces > 1);
    CHECK(!strcmp(res.text, ref.res.text));
    frt_gen_result_clear(&res);

    /* a stop string taken from the middle of the reference text */
    char stop[4];
    memcpy(stop, ref.res.text + 20, 3);
    stop[3] = 0;
    const char *stops[2] = {"\x01never", stop};
    const char *first = strstr(ref.res.text, stop);
    size_t at = (size_t)(first - ref.res.text);
    k.len = 0;
    k.pieces = 0;
    rq.stop = stops;
    rq.n_stop = 2;
    CHECK_OK(frt_service_generate(s, &rq, &res));
    CHECK(!strcmp(res.finish_reason, "stop"));
    CHECK(res.text_len == at && !memcmp(res.text, ref.res.text, at));
    CHECK(k.len == at && !memcmp(k.buf, ref.res.text, at)); /* the stop string never streamed */
    frt_gen_result_clear(&res);
    rq.stop = NULL;
    rq.n_stop = 0;

    /* cancellation mid-stream: the session stays at its last committed token */
    rq.session_id = "st";
    rq.max_tokens = 1000;
    k.len = 0;
    k.pieces = 0;
    k.cancel_after = 3;
    CHECK_OK(frt_service_generate(s, &rq, &res));
    CHECK(!strcmp(res.finish_reason, "cancelled"));
    CHECK(res.n_tokens < 1000);
    frt_service_lock(s);
    const frt_session *ss = frt_sessions_find(frt_service_sessions(s), "st");
    CHECK(ss && ss->n == 100 + res.n_tokens - 1 && ss->pending == res.tokens[res.n_tokens - 1] && !ss->busy);
    CHECK(e->position(e->self) == ss->n);
    frt_service_unlock(s);
    frt_gen_result_clear(&res);
    /* a cancel flag set before the request runs: nothing generated */
    volatile int flag = 1;
    rq.on_text = NULL;
    rq.cancel = &flag;
    CHECK_OK(frt_service_generate(s, &rq, &res));
    CHECK(!strcmp(res.finish_reason, "cancelled") && res.n_tokens == 0);
    frt_gen_result_clear(&res);
    /* end-of-sequence: an engine that ends often stops with "stop", the id not in the text */
    frt_engine_fake_params fp = frt_engine_fake_default_params();
    fp.eos_every = 3;
    frt_engine *e2 = NULL;
    CHECK_OK(frt_engine_fake_create(&fp, &e2));
    frt_service *s2 = make_service(e2, NULL);
    run r = gen(s2, NULL, p, 200, 0);
    CHECK_OK(r.rc);
    CHECK(!strcmp(r.res.finish_reason, "stop") && r.res.n_tokens < 200);
    CHECK(r.res.tokens[r.res.n_tokens - 1] == 258 && !strstr(r.res.text, "<|im_end|>"));
    CHECK((int)r.res.text_len == r.res.n_tokens - 1);
    frt_gen_result_clear(&r.res);
    frt_service_free(s2);
    frt_engine_free(e2);

    frt_gen_result_clear(&ref.res);
    frt_service_free(s);
    frt_engine_free(e);
    free(p);
}

/* Text-level continuation: the generated tokens "t","h" re-tokenize as the
 * merge "th", yet the session appends (the journal's text is a prefix). */
static void test_text_continuation(void)
{
    frt_engine *e = make_engine();
    frt_service *s = make_service(e, NULL);
    char id[FRT_SESSION_ID_MAX];
    CHECK_OK(frt_service_session_create(s, "tc", NULL, 0, 0, id));
    int32_t ids[80];
    for (int i = 0; i < 80; i++) ids[i] = i % 2 ? 'h' : 't'; /* "thth...": not the canonical tokens */
    frt_gen_request rq;
    memset(&rq, 0, sizeof rq);
    rq.session_id = "tc";
    rq.ids = ids;
    rq.n_ids = 80;
    rq.max_tokens = 3;
    frt_gen_result r1, r2;
    CHECK_OK(frt_service_generate(s, &rq, &r1));
    char prompt[256];
    memset(prompt, 0, sizeof prompt);
    for (int i = 0; i < 80; i++) prompt[i] = (char)ids[i];
    memcpy(prompt + 80, r1.text, r1.text_len);
    strcat(prompt, " next");
    rq.ids = NULL;
    rq.n_ids = 0;
    rq.text = prompt;
    rq.text_len = strlen(prompt);
    CHECK_OK(frt_service_generate(s, &rq, &r2));
    CHECK(r2.action == FRT_PREFIX_APPEND && r2.cached_tokens == 82 && r2.prompt_tokens == 88);
    frt_gen_result_clear(&r1);
    frt_gen_result_clear(&r2);
    frt_service_free(s);
    frt_engine_free(e);
}

/* Restart: a pinned prefix comes back from the disk tier, token-exact. */
static void test_restart_persistence(void)
{
    char dir[] = "/tmp/frt_test_planner_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char *prefix = make_text(200, 12), *q = make_text(30, 13), *p = concat(prefix, q);
    run first, again, cold;
    {
        frt_engine *e = make_engine();
        frt_service *s = make_service(e, dir);
        first = gen(s, NULL, p, 6, 200);
        CHECK_OK(first.rc);
        CHECK(first.res.pinned != 0);
        frt_service_free(s);
        frt_engine_free(e);
    }
    {
        frt_engine *e = make_engine();
        frt_service *s = make_service(e, dir);
        again = gen(s, NULL, p, 6, 0);
        CHECK_OK(again.rc);
        CHECK(again.res.action == FRT_PREFIX_RESTORE && again.res.restored == first.res.pinned);
        CHECK(again.res.cached_tokens == 192);
        frt_service_free(s);
        frt_engine_free(e);
    }
    {
        frt_engine *e = make_engine();
        frt_service *s = make_service(e, NULL);
        cold = gen(s, NULL, p, 6, 0);
        CHECK_OK(cold.rc);
        CHECK(cold.res.action == FRT_PREFIX_REBUILD);
        frt_service_free(s);
        frt_engine_free(e);
    }
    CHECK(same_tokens(&again.res, &cold.res) && same_tokens(&first.res, &cold.res));
    frt_gen_result_clear(&first.res), frt_gen_result_clear(&again.res), frt_gen_result_clear(&cold.res);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    free(prefix), free(q), free(p);
}

/* No room for displaced sessions: the session still continues (by a rebuild). */
static void test_budget_starvation(void)
{
    frt_engine *e = make_engine();
    frt_service_params sp = frt_service_default_params();
    sp.budget[0] = sp.budget[1] = 0;
    frt_service *s = NULL;
    CHECK_OK(frt_service_create(e, &sp, &s));
    char id[FRT_SESSION_ID_MAX];
    CHECK_OK(frt_service_session_create(s, "a", NULL, 0, 0, id));
    CHECK_OK(frt_service_session_create(s, "b", NULL, 0, 0, id));
    char *p = make_text(100, 14), *o = make_text(80, 15);
    run r1 = gen(s, "a", p, 4, 0), r2 = gen(s, "b", o, 4, 0);
    CHECK_OK(r1.rc);
    CHECK_OK(r2.rc);
    char *h = concat(p, r1.res.text);
    run r3 = gen(s, "a", h, 4, 0);
    CHECK_OK(r3.rc);
    CHECK(r3.res.action == FRT_PREFIX_REBUILD);
    frt_service_metrics m;
    frt_service_metrics_get(s, &m);
    CHECK(m.snapshot_failures >= 1 && m.displacements == 0);
    CHECK_STATUS(frt_service_session_fork(s, "a", 1, NULL), FRT_ERR_OUT_OF_MEMORY); /* hot: no room */
    CHECK_STATUS(frt_service_session_fork(s, "b", 1, NULL), FRT_ERR_STATE);         /* its boundary was lost */
    frt_gen_result_clear(&r1.res), frt_gen_result_clear(&r2.res), frt_gen_result_clear(&r3.res);
    frt_service_free(s);
    frt_engine_free(e);
    free(p), free(o), free(h);
}

static void test_bad_requests(void)
{
    frt_engine *e = make_engine();
    frt_service *s = make_service(e, NULL);
    frt_gen_result res;
    frt_gen_request rq;
    memset(&rq, 0, sizeof rq);
    rq.text = "hello";
    rq.text_len = 5;
    rq.max_tokens = 0;
    CHECK_STATUS(frt_service_generate(s, &rq, &res), FRT_ERR_INVALID_ARGUMENT);
    rq.max_tokens = 4;
    rq.session_id = "nobody";
    CHECK_STATUS(frt_service_generate(s, &rq, &res), FRT_ERR_NOT_FOUND);
    rq.session_id = NULL;
    rq.text_len = 0;
    rq.text = "";
    CHECK_STATUS(frt_service_generate(s, &rq, &res), FRT_ERR_INVALID_ARGUMENT);
    char *big = make_text(2049, 1);
    rq.text = big;
    rq.text_len = strlen(big);
    CHECK_STATUS(frt_service_generate(s, &rq, &res), FRT_ERR_OUT_OF_RANGE);
    free(big);
    rq.text = "hello"; /* the fake has no logits: the sampling fields that need them are refused */
    rq.text_len = 5;
    rq.sampling.min_p = 0.1f;
    CHECK_STATUS(frt_service_generate(s, &rq, &res), FRT_ERR_UNSUPPORTED);
    rq.sampling.min_p = 0.0f;
    rq.sampling.n_logit_bias = 1;
    CHECK_STATUS(frt_service_generate(s, &rq, &res), FRT_ERR_UNSUPPORTED);
    rq.sampling.n_logit_bias = 0;
    int32_t bad[2] = {5, 100000};
    rq.text = NULL;
    rq.ids = bad;
    rq.n_ids = 2;
    CHECK_STATUS(frt_service_generate(s, &rq, &res), FRT_ERR_INVALID_ARGUMENT);
    /* a prompt that fills the context exactly still gives one token when
     * max_tokens is a default (clamped); asked for explicitly, 10 do not fit
     * (tests/test_serving_limits.c checks that refusal) */
    char *full = make_text(2048, 2);
    rq.ids = NULL;
    rq.text = full;
    rq.text_len = 2048;
    rq.max_tokens = 10;
    rq.clamp_max_tokens = 1;
    CHECK_OK(frt_service_generate(s, &rq, &res));
    CHECK(res.n_tokens == 1 && !strcmp(res.finish_reason, "length"));
    frt_gen_result_clear(&res);
    free(full);
    char id[FRT_SESSION_ID_MAX];
    CHECK_STATUS(frt_service_session_create(s, "bad id", NULL, 0, 0, id), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_service_session_create(s, "dup", NULL, 0, 0, id));
    CHECK_STATUS(frt_service_session_create(s, "dup", NULL, 0, 0, id), FRT_ERR_STATE);
    CHECK_OK(frt_service_session_create(s, NULL, NULL, 0, 0, id));
    CHECK(!strncmp(id, "sess-", 5));
    CHECK_STATUS(frt_service_capsule_pin(s, 12345, 1), FRT_ERR_NOT_FOUND);
    CHECK_STATUS(frt_service_capsule_delete(s, 12345), FRT_ERR_NOT_FOUND);
    /* a non-ChatML template */
    frt_engine_fake_params fp = frt_engine_fake_default_params();
    fp.chatml = 0;
    frt_engine *e2 = NULL;
    CHECK_OK(frt_engine_fake_create(&fp, &e2));
    frt_service *s2 = make_service(e2, NULL);
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", "hi");
    frt_chat_request req = {.messages = msgs, .add_generation_prompt = 1};
    char *text = NULL;
    size_t len = 0, n = 0;
    int32_t *ids = NULL;
    CHECK_STATUS(frt_service_chat_prompt(s2, &req, &text, &len, &ids, &n), FRT_ERR_UNSUPPORTED);
    CHECK(!text && !ids);
    CHECK_STATUS(frt_service_chat_prompt(s, NULL, &text, &len, NULL, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_service_chat_prompt(s, &req, &text, &len, &ids, &n));
    CHECK(text && !strcmp(text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"));
    CHECK(len == strlen(text) && n == 1 + 5 + 2 + 1 + 1 + 1 + 10);
    free(text);
    free(ids);
    json_decref(msgs);
    frt_service_free(s2);
    frt_engine_free(e2);
    frt_service_free(s);
    frt_engine_free(e);
}

int main(void)
{
    test_plan_decisions();
    test_restore_equals_cold();
    test_restore_prefill_turn();
    test_append_after_displacement();
    test_fork_rollback();
    test_coding_agent();
    test_stream_stop_cancel();
    test_text_continuation();
    test_restart_persistence();
    test_budget_starvation();
    test_bad_requests();
    return frt_test_report();
}
