/*
 * policy_write_util.h - the helpers of the policy tests that build their
 * own models (test_cuda_policy.c and policy_gen_util.h's users): a random
 * Pi0 / Pi0.5 of given dimensions written by frt gen-model's code
 * (tools/gen_policy.c) into a directory, and the capsule check of two
 * weight precisions of one policy.
 */
#ifndef FRT_POLICY_WRITE_UTIL_H
#define FRT_POLICY_WRITE_UTIL_H

#include "frt/capsule.h"
#include "frt/checkpoint.h"
#include "frt/fs.h"
#include "frt/policy.h"
#include "frt_test.h"
#include "gen_model.h"

#include <stdlib.h>
#include <string.h>

/* A random policy of dimensions d (seed: its weights) written into dir,
 * the weights whose names contain f32_part (NULL: none) stored in f32
 * (random values a bf16 does not hold), *n_f32 (may be NULL) set to how
 * many; 0 or a negative status. */
static inline int write_policy_dims_f32(const char *dir, const frt_gen_policy_dims *d, int pi05, uint64_t seed,
                                        const char *f32_part, int *n_f32)
{
    frt_weight_spec *w = NULL;
    int n = 0, nf = 0;
    frt_checkpoint *ck = NULL;
    int rc = frt_gen_policy_specs_dims(d, pi05, &w, &n);
    for (int i = 0; rc == 0 && f32_part && i < n; i++)
        if (strstr(w[i].name, f32_part)) w[i].dtype = FRT_DT_F32, nf++;
    if (n_f32) *n_f32 = nf;
    if (rc == 0) rc = frt_gen_model_build_specs(w, n, seed, &ck);
    if (rc == 0) rc = frt_mkdir_p(dir);
    if (rc == 0) rc = frt_checkpoint_write(ck, dir, 0, FRT_CKPT_WRITE_NO_FSYNC);
    if (rc == 0) rc = frt_gen_policy_write_config_dims(d, pi05, dir);
    frt_checkpoint_close(ck);
    free(w);
    return rc;
}

/* A random policy of dimensions d (seed: its weights) written into dir;
 * 0 or a negative status. */
static inline int write_policy_dims(const char *dir, const frt_gen_policy_dims *d, int pi05, uint64_t seed)
{
    return write_policy_dims_f32(dir, d, pi05, seed, NULL, NULL);
}

/* One policy in two weight precisions, f and other: other's capsule is
 * refused by f (FRT_ERR_MISMATCH, f's live state kept), and f's capsule
 * from the start of episode `seed` restored after two runs gives the first
 * run's n floats again. a, b: scratch [n]; 1 when they are the same bytes. */
static inline int policy_precision_capsules(frt_model *f, frt_model *other, const frt_policy_inputs *in,
                                            uint64_t seed, float *a, float *b, size_t n)
{
    frt_capsule *own = NULL, *theirs = NULL;
    CHECK_OK(frt_policy_episode_start(f, seed));
    CHECK_OK(frt_capsule_snapshot(f, FRT_TIER_HOST, NULL, NULL, 0, &own));
    CHECK_OK(frt_capsule_snapshot(other, FRT_TIER_HOST, NULL, NULL, 0, &theirs));
    CHECK_OK(frt_policy_run(f, in, a, n));
    CHECK_OK(frt_policy_run(f, in, b, n)); /* the live state moves on */
    if (theirs) CHECK_STATUS(frt_capsule_restore(f, theirs), FRT_ERR_MISMATCH);
    if (own) CHECK_OK(frt_capsule_restore(f, own));
    CHECK_OK(frt_policy_run(f, in, b, n));
    frt_capsule_free(own), frt_capsule_free(theirs);
    return memcmp(a, b, n * sizeof *a) == 0;
}

#endif
