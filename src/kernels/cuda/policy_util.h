/*
 * kernels/cuda/policy_util.h - the one expression of two element-wise
 * pieces of the robot policies' kernels, so that every kernel computing
 * them writes the same bits by construction: GELU with the tanh
 * approximation (gelu.cu's activations, gemma_mlp.cu's GeGLU) and RoPE's
 * rotation of a pair (pi0_glue.cu's q / k / v kernel, attention_fused.cu's
 * RoPE on load, gemma_mlp.cu's next q / k / v); and the one statement of
 * frt_cuda_attn_mask's rule for the keys past the key mask
 * (softmax_masked.cu, attention_fused.cu, gemma_mlp.cu). The roundings are
 * spelled out with intrinsics where the twins rely on them. Device code,
 * included by .cu files only.
 */
#ifndef FRT_KERNELS_CUDA_POLICY_UTIL_H
#define FRT_KERNELS_CUDA_POLICY_UTIL_H

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/kernels_policy_cuda.h"

/* 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))): torch's
 * approximate="tanh", frt_cpu_gelu_tanh's expression. */
__device__ __forceinline__ float frt_gelu_tanh(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2 / pi), as the twin */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

/* The pair (x1, x2) = (x[p], x[p + head_dim / 2]) rotated by the angle
 * whose cosine and sine are c, s: *y1 = x1 c - x2 s, *y2 = x2 c + x1 s,
 * each product and the sum rounded once (no contraction), as
 * pi0_cuda_qkv_rope (and its twin) compute it. */
__device__ __forceinline__ void frt_rope_rotate(float x1, float x2, float c, float s, float *y1, float *y2)
{
    *y1 = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(-x2, s));
    *y2 = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
}

/* Key j >= m.kmask_len is allowed to token t (frt_cuda_attn_mask): never
 * below sfx_start; suffix key s = j - sfx_start when s < sfx_n, and with
 * solo_first token 0 sees only s == 0. Keys below kmask_len are the
 * caller's (its key mask byte). */
__device__ __forceinline__ bool frt_attn_suffix_allowed(const frt_cuda_attn_mask &m, int t, int j)
{
    if (j < m.sfx_start) return false;
    const int s = j - m.sfx_start;
    return s < m.sfx_n && (!m.solo_first || t > 0 || s == 0);
}

#endif
