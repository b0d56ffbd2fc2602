/*
 * policy_gen_util.h - shared set-up of the tests on generated policies
 * (test_policy_gen.c, test_policy_batch.c, test_cuda_policy_batch.c): a
 * tiny Pi0 / Pi0.5 written by frt gen-model's code (tools/gen_policy.c) at
 * small dimensions (DIMS, or the caller's), random observations for it, a
 * conditioned prompt for CFG, and a hash of the whole live state.
 */
#ifndef FRT_POLICY_GEN_UTIL_H
#define FRT_POLICY_GEN_UTIL_H

#include "frt/checkpoint.h"
#include "frt/fs.h"
#include "frt/policy.h"
#include "frt_test.h"
#include "gen_model.h"
#include "model/model_internal.h"
#include "policy_write_util.h"

#include <xxhash.h>

static const frt_gen_policy_dims DIMS = {
    .v_width = 24, .v_inter = 40, .v_layers = 2, .v_heads = 3, .image_size = 28, .patch = 14,
    .t_width = 32, .t_inter = 48, .layers = 2, .heads = 2, .kv_heads = 1, .head_dim = 8, .vocab = 61,
    .e_width = 16, .e_inter = 24, .chunk = 4, .action_dim = 5, .state_dim = 6, .steps = 10,
};

static inline int write_policy(const char *dir, int pi05, uint64_t seed)
{
    return write_policy_dims(dir, &DIMS, pi05, seed);
}

enum { CAMS = 3, PX = CAMS * 3 * 28 * 28, TOK = 9, NA = 4 * 5 };

typedef struct obs {
    float px[PX], state[6], noise[NA];
    uint8_t cam[CAMS], am[TOK];
    int32_t ids[TOK];
} obs;

static inline void random_obs(obs *o)
{
    frt_test_fill(o->px, PX, -1, 1);
    frt_test_fill(o->state, 6, -1, 1);
    frt_test_fill(o->noise, NA, -2, 2);
    o->cam[0] = 1, o->cam[1] = 0, o->cam[2] = 1; /* the middle camera is absent */
    for (int i = 0; i < TOK; i++) {
        o->ids[i] = 1 + (int32_t)(frt_test_u64() % 60);
        o->am[i] = i < TOK - 3; /* three right pads */
    }
}

static inline frt_policy_inputs inputs(obs *o, int pi05)
{
    frt_policy_inputs in = {o->px, CAMS, 3, 28, 28, o->cam, o->ids, o->am, TOK,
                            pi05 ? NULL : o->state, pi05 ? 0 : 6, o->noise, NULL, NULL, 0};
    return in;
}

/* The conditioned prompt of an observation: other ids, two more tokens. */
typedef struct cond_prompt {
    int32_t ids[TOK + 2];
    uint8_t am[TOK + 2];
} cond_prompt;

static inline void make_cond(const obs *o, cond_prompt *c)
{
    for (int i = 0; i < TOK + 2; i++) {
        c->ids[i] = i < TOK - 2 ? o->ids[i] : (int32_t)(7 + 5 * i) % 61; /* the indicator replaces the tail */
        c->am[i] = 1;
    }
    c->am[TOK + 1] = 0; /* one right pad */
}

static inline frt_policy_inputs guided(obs *o, cond_prompt *c, int pi05)
{
    frt_policy_inputs in = inputs(o, pi05);
    in.input_ids_cond = c->ids;
    in.attention_mask_cond = c->am;
    in.n_tokens_cond = TOK + 2;
    return in;
}

static inline uint64_t state_hash(const frt_model *m)
{
    XXH64_state_t *h = XXH64_createState();
    XXH64_reset(h, 0);
    for (int i = 0; i < m->n_state; i++) XXH64_update(h, frt_buffer_ptr(m->state[i].buf), m->state[i].bytes);
    uint64_t d = XXH64_digest(h);
    XXH64_freeState(h);
    return d;
}

#endif
