/*
 * frt_test_sampling.h - what the sampling tests share (include after
 * frt_test.h): a plain frt_sampling, and the CPU reference of one sampling
 * step (frt/sampling.h) that the model and CUDA tests check against.
 */
#ifndef FRT_TEST_SAMPLING_H
#define FRT_TEST_SAMPLING_H

#include "frt/sampling.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/rng.h"
#include "kernels/cpu/sample_rule.h"

#include <string.h>

/* Every field off, temperature t. */
static inline frt_sampling frt_test_sampling(float t)
{
    frt_sampling s;
    memset(&s, 0, sizeof s);
    s.temperature = t;
    s.top_p = 1.0f;
    return s;
}

/* The token one sampling step with *s draws from logits l [n], counts c,
 * seen and the allowed-token mask (NULL = none; [ceil(n / 32)] u32): the
 * adjusted logits into adj when a field or the mask is on (*used says which
 * array the step sampled from, for the logprobs), then the argmax or
 * frt_cpu_sample_minp with u from *rng (advanced as the step advances it).
 * scratch: FRT_CPU_SAMPLE_SCRATCH(n) floats. */
static inline int frt_test_sample_ref_mask(const float *l, int n, const int32_t *c, const uint8_t *seen,
                                           const frt_sampling *s, const uint32_t *mask, uint64_t *rng, float *adj,
                                           float *scratch, const float **used)
{
    const float *x = l;
    if (frt_sample_adjusts(s)) {
        CHECK_OK(frt_cpu_logits_adjust(adj, l, n, s, c, seen));
        x = adj;
    }
    if (mask) {
        if (x != adj) memcpy(adj, l, (size_t)n * sizeof(float));
        CHECK_OK(frt_cpu_logits_mask(adj, n, mask));
        x = adj;
    }
    *used = x;
    if (s->temperature <= 0.0f) return frt_cpu_argmax(x, n);
    float u = frt_rng_uniform(rng);
    return frt_cpu_sample_minp(x, n, s->temperature, s->top_k, s->top_p, s->min_p, u, scratch);
}

/* frt_test_sample_ref_mask with no mask. */
static inline int frt_test_sample_ref(const float *l, int n, const int32_t *c, const uint8_t *seen,
                                      const frt_sampling *s, uint64_t *rng, float *adj, float *scratch,
                                      const float **used)
{
    return frt_test_sample_ref_mask(l, n, c, seen, s, NULL, rng, adj, scratch, used);
}

/* A random mask of n tokens [ceil(n / 32)] u32 allowing each token with
 * probability about num / 16 (bits past n clear), with at least one token
 * allowed. */
static inline void frt_test_random_mask(uint32_t *mask, int n, int num)
{
    const int words = (n + 31) / 32;
    memset(mask, 0, (size_t)words * sizeof *mask);
    int any = 0;
    for (int j = 0; j < n; j++)
        if ((int)(frt_test_u64() & 15) < num) {
            mask[j >> 5] |= 1u << (j & 31);
            any = 1;
        }
    if (!any) mask[0] |= 1u;
}

#endif
