/*
 * policy_share.c - the turn lock and the locked engine of policy_share.h:
 * how the LLM server and the policy server take turns on one context.
 */
#include "serving/policy_share.h"

#include "util/error.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the turn lock (a ticket lock) ----------------------------------------- */

struct frt_turn_lock {
    pthread_mutex_t mu;
    pthread_cond_t turn;
    uint64_t next;    /* the ticket the next arrival draws */
    uint64_t serving; /* the ticket that holds the lock */
    frt_turn_lock_stats stats[FRT_TURN_SIDES];
};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int frt_turn_lock_create(frt_turn_lock **out)
{
    if (!out) return frt_error(FRT_ERR_INVALID_ARGUMENT, "turn lock: NULL out");
    frt_turn_lock *l = calloc(1, sizeof *l);
    if (!l) return frt_error(FRT_ERR_OUT_OF_MEMORY, "turn lock: out of memory");
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->turn, NULL);
    *out = l;
    return 0;
}

void frt_turn_lock_free(frt_turn_lock *l)
{
    if (!l) return;
    pthread_cond_destroy(&l->turn);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

void frt_turn_lock_acquire(frt_turn_lock *l, int side)
{
    pthread_mutex_lock(&l->mu);
    frt_turn_lock_stats *st = &l->stats[side == FRT_TURN_POLICY];
    const uint64_t ticket = l->next++;
    st->turns++;
    if (ticket != l->serving) {
        const double t0 = now_ms();
        while (ticket != l->serving) pthread_cond_wait(&l->turn, &l->mu);
        const double ms = now_ms() - t0;
        st->waited++;
        st->wait_ms_total += ms;
        if (ms > st->wait_ms_max) st->wait_ms_max = ms;
    }
    pthread_mutex_unlock(&l->mu);
}

void frt_turn_lock_release(frt_turn_lock *l)
{
    pthread_mutex_lock(&l->mu);
    l->serving++;
    pthread_cond_broadcast(&l->turn);
    pthread_mutex_unlock(&l->mu);
}

void frt_turn_lock_stats_get(frt_turn_lock *l, frt_turn_lock_stats *out)
{
    pthread_mutex_lock(&l->mu);
    memcpy(out, l->stats, sizeof l->stats);
    pthread_mutex_unlock(&l->mu);
}

/* ---- the locked engine ----------------------------------------------------- */

typedef struct locked {
    frt_engine eng; /* what callers see; self = this */
    frt_engine in;  /* the wrapped engine (owned) */
    frt_turn_lock *lock;
} locked;

/* lk_NAME: inner's NAME holding the lock. */
#define LOCKED(ret, name, params, args) \
    static ret lk_##name params \
    { \
        locked *l = self; \
        frt_turn_lock_acquire(l->lock, FRT_TURN_LLM); \
        ret r = l->in.name args; \
        frt_turn_lock_release(l->lock); \
        return r; \
    }

/* lk_NAME: inner's NAME as it is (host data only). */
#define PASS(ret, name, params, args) \
    static ret lk_##name params \
    { \
        const locked *l = self; \
        return l->in.name args; \
    }

LOCKED(int, prefill, (void *self, const int32_t *ids, int n), (l->in.self, ids, n))
LOCKED(int, sample, (void *self, const frt_sampling *s, int32_t *token), (l->in.self, s, token))
LOCKED(int, decode, (void *self, const frt_sampling *s, int32_t *token), (l->in.self, s, token))
LOCKED(int, reset, (void *self), (l->in.self))
LOCKED(int, seed, (void *self, uint64_t seed), (l->in.self, seed))
LOCKED(int, position, (void *self), (l->in.self))
LOCKED(int, pending, (void *self), (l->in.self))
LOCKED(int, snapshot, (void *self, int tier, const char *path, const void *salt, size_t salt_len, void **cap),
       (l->in.self, tier, path, salt, salt_len, cap))
LOCKED(int, restore, (void *self, const void *cap), (l->in.self, cap))
LOCKED(int, capsule_load, (void *self, const char *path, void **cap), (l->in.self, path, cap))
LOCKED(int, capsule_save, (void *self, const void *cap, const char *path), (l->in.self, cap, path))
LOCKED(int, capsule_move, (void *self, void *cap, int tier, const char *path), (l->in.self, cap, tier, path))
LOCKED(int, capsule_info, (void *self, const void *cap, frt_engine_capsule_info *info), (l->in.self, cap, info))
LOCKED(int, fork, (void *self, const void *cap, int n, uint64_t seed), (l->in.self, cap, n, seed))
LOCKED(int, branch_sample, (void *self, const frt_sampling *s, int32_t *tokens), (l->in.self, s, tokens))
LOCKED(int, branch_decode, (void *self, const frt_sampling *s, int32_t *tokens), (l->in.self, s, tokens))
LOCKED(int, branch_stop, (void *self, int branch), (l->in.self, branch))
LOCKED(int, branch_select, (void *self, int slot), (l->in.self, slot))
LOCKED(int, logprob, (void *self, int32_t token, double *lp), (l->in.self, token, lp))
LOCKED(int, logprobs, (void *self, frt_logprobs *out), (l->in.self, out))
LOCKED(int, token_mask, (void *self, const uint32_t *allowed, int64_t n_words), (l->in.self, allowed, n_words))
LOCKED(uint64_t, cartridge_fingerprint, (void *self), (l->in.self))
LOCKED(int, cartridge_upload, (void *self, const void *cart, void **resident), (l->in.self, cart, resident))
LOCKED(int, cartridge_inject, (void *self, const void *resident), (l->in.self, resident))
LOCKED(int, cartridge_move, (void *self, void *resident, int tier), (l->in.self, resident, tier))

PASS(int, capsule_key, (void *self, const void *key, size_t len), (l->in.self, key, len))
PASS(uint64_t, digest, (void *self, const int32_t *ids, int n, const void *salt, size_t salt_len),
     (l->in.self, ids, n, salt, salt_len))
PASS(int, token_bytes, (void *self, int32_t id, const char **bytes, size_t *len), (l->in.self, id, bytes, len))
PASS(int, grammar_vocab, (void *self, const frt_grammar_vocab **out), (l->in.self, out))
PASS(int, tokenize, (void *self, const char *text, size_t len, int32_t **ids, size_t *n), (l->in.self, text, len, ids, n))
PASS(int, detokenize, (void *self, const int32_t *ids, size_t n, char **text, size_t *len),
     (l->in.self, ids, n, text, len))
PASS(int, chat_prompt, (void *self, const frt_chat_request *req, char **text, size_t *len, int32_t **ids, size_t *n),
     (l->in.self, req, text, len, ids, n))
PASS(int, cartridge_supported, (void *self), (l->in.self))
PASS(size_t, cartridge_bytes, (void *self, const void *cart), (l->in.self, cart))

/* Frees device memory (capsules, resident cartridges): in turn too. */
static void lk_capsule_free(void *self, void *cap)
{
    locked *l = self;
    frt_turn_lock_acquire(l->lock, FRT_TURN_LLM);
    l->in.capsule_free(l->in.self, cap);
    frt_turn_lock_release(l->lock);
}

static void lk_cartridge_resident_free(void *self, void *resident)
{
    locked *l = self;
    frt_turn_lock_acquire(l->lock, FRT_TURN_LLM);
    l->in.cartridge_resident_free(l->in.self, resident);
    frt_turn_lock_release(l->lock);
}

static void lk_destroy(void *self)
{
    locked *l = self;
    if (l->in.destroy) l->in.destroy(l->in.self);
    free(l);
}

/* e->NAME = lk_NAME where inner has NAME, else NULL. */
#define SET(name) e->name = l->in.name ? lk_##name : NULL

int frt_engine_locked_create(frt_engine *inner, frt_turn_lock *lock, frt_engine **out)
{
    if (!inner || !lock || !out) {
        frt_engine_free(inner);
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "locked engine: NULL argument");
    }
    locked *l = calloc(1, sizeof *l);
    if (!l) {
        frt_engine_free(inner);
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "locked engine: out of memory");
    }
    l->in = *inner; /* the struct is the engine's own storage: inner->self owns it, freed by destroy */
    l->lock = lock;
    frt_engine *e = &l->eng;
    e->self = l;
    e->facts = inner->facts;
    SET(prefill), SET(sample), SET(decode), SET(reset), SET(seed), SET(position), SET(pending);
    SET(snapshot), SET(restore), SET(capsule_load), SET(capsule_save), SET(capsule_move), SET(capsule_info);
    SET(capsule_free), SET(capsule_key), SET(digest);
    SET(fork), SET(branch_sample), SET(branch_decode), SET(branch_stop), SET(branch_select), SET(logprob);
    SET(logprobs), SET(token_bytes), SET(grammar_vocab), SET(token_mask);
    SET(tokenize), SET(detokenize), SET(chat_prompt);
    SET(cartridge_supported), SET(cartridge_fingerprint), SET(cartridge_bytes), SET(cartridge_upload);
    SET(cartridge_inject), SET(cartridge_move), SET(cartridge_resident_free);
    e->destroy = lk_destroy;
    *out = e;
    return 0;
}
