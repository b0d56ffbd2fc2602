/*
 * test_policy_share.c - the turn lock and the locked engine of
 * src/serving/policy_share.h (an LLM and a policy taking turns on one
 * context):
 *   - FIFO: two threads queued behind a holder get their turns in arrival
 *     order, whatever their side;
 *   - no starvation: a thread that takes turns back to back (an LLM's
 *     decode steps) lets a waiter in after the turn in progress (and at
 *     most one that drew its ticket just before the waiter);
 *   - the statistics per side (turns, waits);
 *   - the locked engine over the fake engine: the same tokens as the bare
 *     engine, one LLM turn per locked call, none for host-only calls,
 *     entries the engine lacks stay NULL, facts copied;
 *   - bad arguments: NULL out, NULL inner, NULL lock (the inner engine is
 *     freed: the call takes it).
 */
#include "frt_test.h"

#include "serving/policy_share.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static frt_turn_lock_stats side_stats(frt_turn_lock *l, int side)
{
    frt_turn_lock_stats st[FRT_TURN_SIDES];
    frt_turn_lock_stats_get(l, st);
    return st[side];
}

/* Waits until `side` has drawn `turns` tickets (a thread is queued). */
static void wait_turns(frt_turn_lock *l, int side, uint64_t turns)
{
    for (int i = 0; i < 100000 && side_stats(l, side).turns < turns; i++) usleep(100);
    CHECK(side_stats(l, side).turns == turns);
}

typedef struct taker {
    frt_turn_lock *l;
    int side;
    atomic_int *order; /* the next position */
    int got;           /* the position this thread got its turn at */
} taker;

static void *take(void *arg)
{
    taker *t = arg;
    frt_turn_lock_acquire(t->l, t->side);
    t->got = atomic_fetch_add(t->order, 1);
    frt_turn_lock_release(t->l);
    return NULL;
}

static void test_fifo(void)
{
    frt_turn_lock *l = NULL;
    CHECK_OK(frt_turn_lock_create(&l));
    atomic_int order = 0;
    taker a = {l, FRT_TURN_POLICY, &order, -1}, b = {l, FRT_TURN_LLM, &order, -1};
    pthread_t ta, tb;
    frt_turn_lock_acquire(l, FRT_TURN_LLM); /* the holder */
    pthread_create(&ta, NULL, take, &a);
    wait_turns(l, FRT_TURN_POLICY, 1);
    pthread_create(&tb, NULL, take, &b);
    wait_turns(l, FRT_TURN_LLM, 2);
    frt_turn_lock_release(l);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(a.got == 0 && b.got == 1);
    frt_turn_lock_stats p = side_stats(l, FRT_TURN_POLICY), m = side_stats(l, FRT_TURN_LLM);
    CHECK(p.turns == 1 && p.waited == 1 && p.wait_ms_max > 0 && p.wait_ms_total >= p.wait_ms_max);
    CHECK(m.turns == 2 && m.waited == 1);
    frt_turn_lock_free(l);
    printf("fifo: two queued threads served in arrival order; per-side statistics\n");
}

typedef struct stepper {
    frt_turn_lock *l;
    atomic_int steps; /* turns completed */
    atomic_int stop;
} stepper;

/* An LLM's decode loop: turns back to back. */
static void *steps(void *arg)
{
    stepper *s = arg;
    while (!atomic_load(&s->stop)) {
        frt_turn_lock_acquire(s->l, FRT_TURN_LLM);
        usleep(200); /* one step */
        atomic_fetch_add(&s->steps, 1);
        frt_turn_lock_release(s->l);
    }
    return NULL;
}

static void test_no_starvation(void)
{
    frt_turn_lock *l = NULL;
    CHECK_OK(frt_turn_lock_create(&l));
    stepper s = {l, 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, steps, &s);
    int worst = 0;
    for (int i = 0; i < 20; i++) {
        while (atomic_load(&s.steps) < 5 * (i + 1)) usleep(50);
        const int before = atomic_load(&s.steps);
        frt_turn_lock_acquire(l, FRT_TURN_POLICY);
        const int during = atomic_load(&s.steps) - before; /* steps that ended while this one waited */
        frt_turn_lock_release(l);
        if (during > worst) worst = during;
    }
    atomic_store(&s.stop, 1);
    pthread_join(t, NULL);
    /* the step in progress, and at most one more that drew its ticket
     * between the read of `before` and this thread's ticket */
    CHECK_MSG(worst <= 2, "a waiter let %d steps of the other thread pass", worst);
    CHECK(side_stats(l, FRT_TURN_POLICY).turns == 20);
    frt_turn_lock_free(l);
    printf("no starvation: a waiter beside a back-to-back stepper let at most %d of its steps pass (<= 2)\n", worst);
}

static uint64_t llm_turns(frt_turn_lock *l) { return side_stats(l, FRT_TURN_LLM).turns; }

static void test_locked_engine(void)
{
    frt_engine_fake_params fp = frt_engine_fake_default_params();
    frt_engine *bare = NULL, *inner = NULL, *e = NULL;
    CHECK_OK(frt_engine_fake_create(&fp, &bare));
    CHECK_OK(frt_engine_fake_create(&fp, &inner));
    frt_turn_lock *l = NULL;
    CHECK_OK(frt_turn_lock_create(&l));
    CHECK_OK(frt_engine_locked_create(inner, l, &e));
    CHECK(e != inner && e->self != inner->self);
    CHECK(!memcmp(&e->facts, &bare->facts, sizeof e->facts));
    CHECK(e->fork == NULL && bare->fork == NULL); /* the fake has no branches: still none */
    CHECK(e->cartridge_upload == NULL && bare->cartridge_upload == NULL);
    CHECK(e->prefill && e->decode && e->snapshot && e->tokenize && e->destroy);

    int32_t ids[37], want[8], got[8];
    for (int i = 0; i < 37; i++) ids[i] = (int32_t)frt_test_rand(1.0f, 200.0f);
    CHECK_OK(bare->prefill(bare->self, ids, 37));
    CHECK_OK(bare->sample(bare->self, NULL, &want[0]));
    for (int i = 1; i < 8; i++) CHECK_OK(bare->decode(bare->self, NULL, &want[i]));
    CHECK_OK(e->prefill(e->self, ids, 37));
    CHECK_OK(e->sample(e->self, NULL, &got[0]));
    for (int i = 1; i < 8; i++) CHECK_OK(e->decode(e->self, NULL, &got[i]));
    CHECK(!memcmp(want, got, sizeof want));
    CHECK(e->position(e->self) == bare->position(bare->self));
    CHECK(llm_turns(l) == 1 + 1 + 7 + 1); /* prefill, sample, 7 decodes, position */
    int32_t *tok = NULL;
    size_t n = 0;
    CHECK_OK(e->tokenize(e->self, "hello", 5, &tok, &n));
    free(tok);
    CHECK(llm_turns(l) == 10); /* host-only: no turn */
    void *cap = NULL;
    CHECK_OK(e->snapshot(e->self, FRT_ENGINE_TIER_HOST, NULL, NULL, 0, &cap));
    CHECK_OK(e->reset(e->self));
    CHECK_OK(e->restore(e->self, cap));
    e->capsule_free(e->self, cap);
    CHECK(llm_turns(l) == 14);
    CHECK(e->position(e->self) == 37 + 7);
    /* a failing call keeps its contract and releases the turn */
    CHECK_STATUS(e->prefill(e->self, NULL, 3), FRT_ERR_INVALID_ARGUMENT);
    CHECK(e->pending(e->self) >= 0); /* the lock is free again: this would deadlock otherwise */
    frt_engine_free(e);
    frt_engine_free(bare);
    frt_turn_lock_free(l);
    printf("locked engine: the fake engine's tokens, one turn per device call, none for the tokenizer\n");
}

static void test_bad(void)
{
    CHECK_STATUS(frt_turn_lock_create(NULL), FRT_ERR_INVALID_ARGUMENT);
    frt_turn_lock *l = NULL;
    CHECK_OK(frt_turn_lock_create(&l));
    frt_engine_fake_params fp = frt_engine_fake_default_params();
    frt_engine *inner = NULL, *e = NULL;
    CHECK_STATUS(frt_engine_locked_create(NULL, l, &e), FRT_ERR_INVALID_ARGUMENT);
    CHECK_OK(frt_engine_fake_create(&fp, &inner));
    CHECK_STATUS(frt_engine_locked_create(inner, NULL, &e), FRT_ERR_INVALID_ARGUMENT); /* inner freed */
    CHECK_OK(frt_engine_fake_create(&fp, &inner));
    CHECK_STATUS(frt_engine_locked_create(inner, l, NULL), FRT_ERR_INVALID_ARGUMENT);
    CHECK(e == NULL);
    frt_turn_lock_free(l);
    frt_turn_lock_free(NULL);
    printf("bad arguments refused\n");
}

int main(void)
{
    frt_test_seed(23);
    test_fifo();
    test_no_starvation();
    test_locked_engine();
    test_bad();
    return frt_test_report();
}
