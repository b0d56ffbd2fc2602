/*
 * kernels/cpu/sample_rule.h - the per-token arithmetic of the sampling
 * step's logit bias and penalties (steps 1-3 of frt/sampling.h, which cites
 * OpenAI's and vLLM's definitions), shared by the CPU reference
 * (frt_cpu_logits_adjust) and the CUDA kernel (logits_adjust.cu): the very
 * same code, static inline and __host__ __device__ under nvcc, with every
 * f32 operation rounded on its own (no fused multiply-add on the device), so
 * both backends produce the same bits.
 */
#ifndef FRT_KERNELS_SAMPLE_RULE_H
#define FRT_KERNELS_SAMPLE_RULE_H

#include "frt/sampling.h"

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define FRT_SAMPLE_FN static inline __host__ __device__
#else
#define FRT_SAMPLE_FN static inline
#endif

#ifdef __CUDA_ARCH__
#define FRT_SR_MUL(a, b) __fmul_rn(a, b)
#define FRT_SR_DIV(a, b) __fdiv_rn(a, b)
#define FRT_SR_ADD(a, b) __fadd_rn(a, b)
#define FRT_SR_SUB(a, b) __fsub_rn(a, b)
#else
#define FRT_SR_MUL(a, b) ((a) * (b))
#define FRT_SR_DIV(a, b) ((a) / (b))
#define FRT_SR_ADD(a, b) ((a) + (b))
#define FRT_SR_SUB(a, b) ((a) - (b))
#endif

/* 1 when the step adjusts the logits (a bias entry or a penalty is on). */
FRT_SAMPLE_FN int frt_sample_adjusts(const frt_sampling *s)
{
    const float r = s->repetition_penalty;
    return s->n_logit_bias > 0 || s->presence_penalty != 0.0f || s->frequency_penalty != 0.0f ||
           (r != 0.0f && r != 1.0f);
}

/* 1 when the step samples from a written copy of the logits: steps 1-3 on
 * or the allowed-token mask (mask_on: the step record's flag, step 3b of
 * frt/sampling.h). */
FRT_SAMPLE_FN int frt_sample_reads_adjusted(const frt_sampling *s, int32_t mask_on)
{
    return mask_on != 0 || frt_sample_adjusts(s);
}

/* Step 3b on one logit: l when bit j of mask (bit j % 32 of word j / 32) is
 * set, else -inf. */
FRT_SAMPLE_FN float frt_sample_mask(float l, const uint32_t *mask, int j)
{
    return (mask[j >> 5] >> (j & 31)) & 1u ? l : -INFINITY;
}

/* Steps 2-3 on one logit l (its bias already added): repetition penalty
 * when the token was seen, then frequency and presence when it was
 * generated c > 0 times. */
FRT_SAMPLE_FN float frt_sample_penalize(float l, int32_t c, uint8_t seen, const frt_sampling *s)
{
    const float r = s->repetition_penalty;
    if (seen && r != 0.0f && r != 1.0f) l = l > 0.0f ? FRT_SR_DIV(l, r) : FRT_SR_MUL(l, r);
    if (c > 0) l = FRT_SR_SUB(FRT_SR_SUB(l, FRT_SR_MUL(s->frequency_penalty, (float)c)), s->presence_penalty);
    return l;
}

/* Steps 1-3 on a biased token's logit. */
FRT_SAMPLE_FN float frt_sample_bias_penalize(float l, float bias, int32_t c, uint8_t seen, const frt_sampling *s)
{
    return frt_sample_penalize(FRT_SR_ADD(l, bias), c, seen, s);
}

#endif /* FRT_KERNELS_SAMPLE_RULE_H */
