/*
 * policy_write_util.h - a random Pi0 / Pi0.5 of given dimensions written by
 * frt gen-model's code (tools/gen_policy.c) into a directory: the one helper
 * of the policy tests that build their own observations
 * (test_cuda_policy.c) and of policy_gen_util.h's users.
 */
#ifndef FRT_POLICY_WRITE_UTIL_H
#define FRT_POLICY_WRITE_UTIL_H

#include "frt/checkpoint.h"
#include "frt/fs.h"
#include "gen_model.h"

#include <stdlib.h>

/* A random policy of dimensions d (seed: its weights) written into dir;
 * 0 or a negative status. */
static inline int write_policy_dims(const char *dir, const frt_gen_policy_dims *d, int pi05, uint64_t seed)
{
    frt_weight_spec *w = NULL;
    int n = 0;
    frt_checkpoint *ck = NULL;
    int rc = frt_gen_policy_specs_dims(d, pi05, &w, &n);
    if (rc == 0) rc = frt_gen_model_build_specs(w, n, seed, &ck);
    if (rc == 0) rc = frt_mkdir_p(dir);
    if (rc == 0) rc = frt_checkpoint_write(ck, dir, 0, FRT_CKPT_WRITE_NO_FSYNC);
    if (rc == 0) rc = frt_gen_policy_write_config_dims(d, pi05, dir);
    frt_checkpoint_close(ck);
    free(w);
    return rc;
}

#endif
