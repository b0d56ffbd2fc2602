/*
 * kernels/cuda/softmax_masked.cu - the masked softmax of a policy's
 * attention (kernels_policy_cuda.h: frt_cuda_softmax_masked): scores f32 in,
 * probabilities bf16 out (the P of P.V), masked keys 0.
 *
 * Rows of up to 2048 keys (every policy shape: SigLIP's 256, the prefix's
 * ~1000 with 3 cameras, the expert's prefix + 50) take the register path: one warp a
 * row, the row's scores read once into registers (16-byte loads when s is
 * 16-byte aligned, p 8-byte aligned and ld % 4 == 0; scalar loads of the
 * same ownership otherwise), the mask tested once per key, max and sum by
 * warp shuffles in a fixed butterfly, exp once per key, 4 bf16 stored at a
 * time. Longer rows take one block a row (the max and the sum meet in a
 * fixed shared-memory tree). Either way the summation order depends on
 * `keys` only, so the bits are the same run to run. Tested directly against
 * a CPU softmax and through frt_cuda_attention_masked against
 * frt_cpu_attention_masked (tests/test_cuda_policy_kernels.c).
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/kernels_policy_cuda.h"
#include "kernels/cuda/norm_util.h"
#include "kernels/cuda/policy_util.h"

#include <math.h>

#define SM_THREADS 256

/* km: the row's batch's key mask (NULL: every prefix key allowed). */
static __device__ __forceinline__ bool key_allowed(const frt_cuda_attn_mask &m, const uint8_t *km, int t, int j)
{
    if (j < m.kmask_len) return !km || km[j];
    return frt_attn_suffix_allowed(m, t, j);
}

template <bool MAX>
static __device__ float block_reduce(float v, float *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = SM_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            const float o = sh[threadIdx.x + s];
            sh[threadIdx.x] = MAX ? fmaxf(sh[threadIdx.x], o) : sh[threadIdx.x] + o;
        }
        __syncthreads();
    }
    const float r = sh[0];
    __syncthreads();
    return r;
}

__global__ void __launch_bounds__(SM_THREADS) softmax_masked_kernel(__nv_bfloat16 *p, const float *s, int keys, int ld,
                                                                    frt_cuda_attn_mask m)
{
    __shared__ float sh[SM_THREADS];
    const long long row = blockIdx.x;
    const int t = (int)((row / m.rows_per_token) % m.tokens);
    const long long b = row / ((long long)m.tokens * m.rows_per_token);
    const uint8_t *km = m.d_kmask ? m.d_kmask + b * m.kmask_stride : NULL;
    const float *sr = s + row * ld;
    __nv_bfloat16 *pr = p + row * ld;
    const bool row_on = !m.d_rmask || m.d_rmask[b * m.kmask_stride + t];
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < keys; j += SM_THREADS)
        if (row_on && key_allowed(m, km, t, j)) mx = fmaxf(mx, sr[j]);
    mx = block_reduce<true>(mx, sh);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < keys; j += SM_THREADS)
        if (row_on && key_allowed(m, km, t, j)) sum += expf(sr[j] - mx);
    sum = block_reduce<false>(sum, sh);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int j = threadIdx.x; j < keys; j += SM_THREADS) {
        const bool on = row_on && key_allowed(m, km, t, j);
        pr[j] = __float2bfloat16_rn(on ? expf(sr[j] - mx) * inv : 0.0f);
    }
}

/* The register path: one warp a row, lane l owning the 4-key groups
 * l + 32 i (i < NV) of the row, so a row of up to 128 NV keys is read once
 * (16-byte loads when aligned), max and sum meet by warp shuffles (a fixed
 * butterfly: every lane gets the same bits), exp is computed once per key
 * and the probabilities leave as 8-byte stores of 4 bf16. */
#define SMW_ROWS 4  /* rows (warps) per block */
#define SMW_MAX_NV 16 /* groups of 4 keys per lane: rows up to 2048 keys */

template <int NV>
__global__ void __launch_bounds__(32 * SMW_ROWS) softmax_warp_kernel(__nv_bfloat16 *p, const float *s, int rows,
                                                                     int keys, int ld, frt_cuda_attn_mask m, bool vec)
{
    frt_pdl_wait(); /* launched with PDL: the scores are the previous kernel's */
    const long long row = (long long)blockIdx.x * SMW_ROWS + threadIdx.x / 32;
    if (row >= rows) return; /* uniform over the warp */
    const int lane = threadIdx.x & 31;
    const int t = (int)((row / m.rows_per_token) % m.tokens);
    const long long b = row / ((long long)m.tokens * m.rows_per_token);
    const uint8_t *km = m.d_kmask ? m.d_kmask + b * m.kmask_stride : NULL;
    const size_t o = (size_t)row * ld;
    const bool row_on = !m.d_rmask || m.d_rmask[b * m.kmask_stride + t];
    float v[NV][4];
    unsigned long long on = 0; /* bit 4 i + e: key 4 (lane + 32 i) + e is allowed */
#pragma unroll
    for (int i = 0; i < NV; i++) { /* every load (scores, mask bytes) before any arithmetic */
        const int j = 4 * (lane + 32 * i);
#pragma unroll
        for (int e = 0; e < 4; e++) v[i][e] = 0.0f; /* keys past the row: never allowed */
        if (j + 4 <= keys) {
            norm_ld<4>(s, FRT_CUDA_F32, o + j, vec, v[i]);
        } else {
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (j + e < keys) v[i][e] = s[o + j + e];
        }
#pragma unroll
        for (int e = 0; e < 4; e++)
            if (row_on && j + e < keys && key_allowed(m, km, t, j + e)) on |= 1ull << (4 * i + e);
    }
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < NV; i++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            if ((on >> (4 * i + e)) & 1ull) mx = fmaxf(mx, v[i][e]);
    mx = frt_warp_max(mx);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            v[i][e] = (on >> (4 * i + e)) & 1ull ? expf(v[i][e] - mx) : 0.0f;
            sum += v[i][e];
        }
    sum = frt_warp_sum(sum);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++) {
        const int j = 4 * (lane + 32 * i);
#pragma unroll
        for (int e = 0; e < 4; e++) v[i][e] *= inv;
        if (j + 4 <= keys) {
            norm_st<4>(p, FRT_CUDA_BF16, o + j, vec, v[i]);
        } else {
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (j + e < keys) p[o + j + e] = __float2bfloat16_rn(v[i][e]);
        }
    }
}

/* The instantiations: 1..8, 12, 16 groups a lane. */
static constexpr int smw_below(int nv) { return nv > 8 ? nv - 4 : nv - 1; }

/* Launches softmax_warp_kernel<NV'> with PDL, NV' the smallest
 * instantiation >= nv (1 <= nv <= NV). */
template <int NV>
static cudaError_t smw_launch(int nv, unsigned grid, void *stream, __nv_bfloat16 *p, const float *s, int rows,
                              int keys, int ld, const frt_cuda_attn_mask &m, bool vec)
{
    if constexpr (NV > 1)
        if (nv <= smw_below(NV)) return smw_launch<smw_below(NV)>(nv, grid, stream, p, s, rows, keys, ld, m, vec);
    return frt_pdl_launch(softmax_warp_kernel<NV>, dim3(grid), dim3(32 * SMW_ROWS), 0, stream, p, s, rows, keys, ld,
                          m, vec);
}

extern "C" int frt_cuda_softmax_masked(void *stream, uint16_t *p, const float *s, int rows, int keys, int ld,
                                       const frt_cuda_attn_mask *mask)
{
    FRT_ARG(p && s && mask, "softmax_masked: NULL pointer");
    FRT_ARG(rows >= 1 && keys >= 1 && ld >= keys && mask->rows_per_token >= 1 && mask->tokens >= 1 &&
                mask->kmask_len >= 0 && mask->sfx_start >= mask->kmask_len && mask->sfx_n >= 0,
            "softmax_masked: rows %d keys %d ld %d or a bad mask", rows, keys, ld);
    const int nv = (keys + 127) / 128;
    if (nv > SMW_MAX_NV) {
        softmax_masked_kernel<<<rows, SM_THREADS, 0, (cudaStream_t)stream>>>((__nv_bfloat16 *)p, s, keys, ld, *mask);
        FRT_LAUNCH_CHECK();
        return 0;
    }
    const bool vec = ld % 4 == 0 && norm_aligned(s, FRT_CUDA_F32) && norm_aligned(p, FRT_CUDA_BF16);
    __nv_bfloat16 *pb = (__nv_bfloat16 *)p;
    const unsigned grid = (unsigned)((rows + SMW_ROWS - 1) / SMW_ROWS);
    FRT_CUDA_TRY(smw_launch<SMW_MAX_NV>(nv, grid, stream, pb, s, rows, keys, ld, *mask, vec));
    FRT_LAUNCH_CHECK();
    return 0;
}
