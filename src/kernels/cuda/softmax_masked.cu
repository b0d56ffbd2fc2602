/*
 * kernels/cuda/softmax_masked.cu - the masked softmax of a policy's
 * attention (kernels_policy_cuda.h: frt_cuda_softmax_masked): scores f32 in,
 * probabilities bf16 out (the P of P.V), masked keys 0. One block per row;
 * the max and the sum meet in a fixed shared-memory tree (the order depends
 * on the block size only). Tested through frt_cuda_attention_masked against
 * frt_cpu_attention_masked (tests/test_cuda_policy_kernels.c).
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/kernels_policy_cuda.h"

#include <math.h>

#define SM_THREADS 256

/* km: the row's batch's key mask (NULL: every prefix key allowed). */
static __device__ __forceinline__ bool key_allowed(const frt_cuda_attn_mask &m, const uint8_t *km, int t, int j)
{
    if (j < m.kmask_len) return !km || km[j];
    if (j < m.sfx_start) return false;
    const int s = j - m.sfx_start;
    if (s >= m.sfx_n) return false;
    return !m.solo_first || t > 0 || s == 0;
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
    const bool row_on = !m.d_rmask || m.d_rmask[t];
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

extern "C" int frt_cuda_softmax_masked(void *stream, uint16_t *p, const float *s, int rows, int keys, int ld,
                                       const frt_cuda_attn_mask *mask)
{
    FRT_ARG(p && s && mask, "softmax_masked: NULL pointer");
    FRT_ARG(rows >= 1 && keys >= 1 && ld >= keys && mask->rows_per_token >= 1 && mask->tokens >= 1 &&
                mask->kmask_len >= 0 && mask->sfx_start >= mask->kmask_len && mask->sfx_n >= 0,
            "softmax_masked: rows %d keys %d ld %d or a bad mask", rows, keys, ld);
    softmax_masked_kernel<<<rows, SM_THREADS, 0, (cudaStream_t)stream>>>((__nv_bfloat16 *)p, s, keys, ld, *mask);
    FRT_LAUNCH_CHECK();
    return 0;
}
