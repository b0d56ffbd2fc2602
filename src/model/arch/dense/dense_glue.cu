/*
 * arch/dense/dense_glue.cu - a Linear's bias and RoPE from a frequency
 * table, for the dense CUDA forward pass (dense_glue.h). Elementwise: one
 * thread per output element (bias) or per (token, head, pair) (RoPE); no
 * reductions, so the bits do not depend on the launch shape.
 */
#include "model/arch/dense/dense_glue.h"

#include "kernels/cuda/cuda_util.h"

static __device__ __forceinline__ int dense_count(const int32_t *d_n, int max_n)
{
    int n = d_n ? *d_n : max_n;
    return n < 0 ? 0 : (n > max_n ? max_n : n);
}

__global__ void bias_add_kernel(float *y, const float *b, const int32_t *d_n, int max_n, int dim)
{
    const long long total = (long long)dense_count(d_n, max_n) * dim;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x)
        y[i] += b[i % dim];
}

extern "C" int frt_dense_bias_add(void *stream, float *y, const float *b, const int32_t *d_n, int max_n, int dim)
{
    FRT_ARG(y && b, "dense bias: NULL pointer");
    FRT_ARG(max_n >= 1 && dim >= 1, "dense bias: max_n %d dim %d", max_n, dim);
    bias_add_kernel<<<frt_grid_blocks((size_t)max_n * (size_t)dim, 256, 1024), 256, 0, (cudaStream_t)stream>>>(
        y, b, d_n, max_n, dim);
    FRT_LAUNCH_CHECK();
    return 0;
}

/* Rotates the pair (p, p + half) of one head by angle a (rotate-half). */
static __device__ __forceinline__ void rope_pair(float *xh, int p, int half, float a)
{
    const float c = cosf(a), s = sinf(a);
    const float x1 = xh[p], x2 = xh[p + half];
    xh[p] = x1 * c + (-x2) * s;
    xh[p + half] = x2 * c + x1 * s;
}

__global__ void rope_table_kernel(float *x, const float *inv_freq, const int32_t *d_start, const int32_t *d_n,
                                  int max_n, int n_heads, int head_dim)
{
    const int half = head_dim / 2;
    const long long total = (long long)dense_count(d_n, max_n) * n_heads * half;
    const int start = *d_start;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int p = (int)(i % half);
        const long long th = i / half; /* token * n_heads + head */
        const int t = (int)(th / n_heads);
        rope_pair(x + th * head_dim, p, half, (float)(start + t) * inv_freq[p]);
    }
}

extern "C" int frt_dense_rope_table(void *stream, float *x, const float *inv_freq, const int32_t *d_start,
                                    const int32_t *d_n, int max_n, int n_heads, int head_dim)
{
    FRT_ARG(x && inv_freq && d_start, "dense rope: NULL pointer");
    FRT_ARG(max_n >= 1 && n_heads >= 1 && head_dim >= 2 && head_dim <= 1024 && head_dim % 2 == 0,
            "dense rope: max_n %d heads %d head_dim %d", max_n, n_heads, head_dim);
    size_t total = (size_t)max_n * (size_t)n_heads * (size_t)(head_dim / 2);
    rope_table_kernel<<<frt_grid_blocks(total, 256, 1024), 256, 0, (cudaStream_t)stream>>>(
        x, inv_freq, d_start, d_n, max_n, n_heads, head_dim);
    FRT_LAUNCH_CHECK();
    return 0;
}

/* One sequence's decode token: RoPE of its q and k heads at *d_start, and
 * its K (roped) and V rows into the caches. Item i of the grid-stride loop
 * is a q pair, a k pair (roped, then both elements stored by the same
 * thread: no barrier, so any number of blocks) or a V element. */
__device__ __forceinline__ void decode_prep_one(float *qb, float *kb, const float *vb, const float *inv_freq,
                                                __nv_bfloat16 *kcache, __nv_bfloat16 *vcache, const int32_t *d_start,
                                                int max_seq, int n_heads, int n_kv, int head_dim)
{
    frt_pdl_wait(); /* launched with PDL: q, k, v and the position come from the kernels before */
    const int half = head_dim / 2;
    const int start = *d_start;
    const long long row = (long long)frt_dyn_pos(d_start);
    const bool store = row < max_seq;
    const int row_len = n_kv * head_dim;
    __nv_bfloat16 *kc = kcache + (size_t)row * row_len, *vc = vcache + (size_t)row * row_len;
    const int q_pairs = n_heads * half, k_end = q_pairs + n_kv * half, items = k_end + row_len;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < items; i += gridDim.x * blockDim.x) {
        if (i < k_end) {
            const int h = i / half, p = i % half;
            const bool is_k = h >= n_heads;
            float *xh = is_k ? kb + (size_t)(h - n_heads) * head_dim : qb + (size_t)h * head_dim;
            rope_pair(xh, p, half, (float)start * inv_freq[p]);
            if (is_k && store) {
                const size_t e = (size_t)(h - n_heads) * head_dim + p;
                kc[e] = __float2bfloat16_rn(kb[e]);
                kc[e + half] = __float2bfloat16_rn(kb[e + half]);
            }
        } else if (store) {
            const int e = i - k_end;
            vc[e] = __float2bfloat16_rn(vb[e]);
        }
    }
}

/* Branch blockIdx.y (frt_dense_decode_prep_batch). */
__global__ void decode_prep_batch_kernel(float *q, float *k, const float *v, const float *inv_freq,
                                         __nv_bfloat16 *const *kcs, __nv_bfloat16 *const *vcs,
                                         const int32_t *const *starts, int max_seq, int n_heads, int n_kv,
                                         int head_dim)
{
    const int b = blockIdx.y;
    decode_prep_one(q + (size_t)b * n_heads * head_dim, k + (size_t)b * n_kv * head_dim,
                    v + (size_t)b * n_kv * head_dim, inv_freq, kcs[b], vcs[b], starts[b], max_seq, n_heads, n_kv,
                    head_dim);
}

/* The single sequence (frt_dense_decode_prep). */
__global__ void decode_prep_kernel(float *q, float *k, const float *v, const float *inv_freq, __nv_bfloat16 *kc,
                                   __nv_bfloat16 *vc, const int32_t *d_start, int max_seq, int n_heads, int n_kv,
                                   int head_dim)
{
    decode_prep_one(q, k, v, inv_freq, kc, vc, d_start, max_seq, n_heads, n_kv, head_dim);
}

#define PREP_THREADS 128

/* Blocks a sequence: one item per thread (the pairs and the V row). */
static unsigned int decode_prep_blocks(int n_heads, int n_kv_heads, int head_dim)
{
    const long long items = (long long)(n_heads + n_kv_heads) * (head_dim / 2) + (long long)n_kv_heads * head_dim;
    const long long b = (items + PREP_THREADS - 1) / PREP_THREADS;
    return (unsigned int)(b < 1 ? 1 : (b > 1024 ? 1024 : b));
}

extern "C" int frt_dense_decode_prep(void *stream, float *q, float *k, const float *v, const float *inv_freq,
                                     uint16_t *k_cache, uint16_t *v_cache, const int32_t *d_start, int max_seq,
                                     int n_heads, int n_kv_heads, int head_dim)
{
    FRT_ARG(q && k && v && inv_freq && k_cache && v_cache && d_start, "dense decode prep: NULL pointer");
    FRT_ARG(max_seq >= 1 && n_heads >= 1 && n_kv_heads >= 1 && head_dim >= 2 && head_dim <= 1024 &&
                head_dim % 2 == 0,
            "dense decode prep: max_seq %d heads %d / %d head_dim %d", max_seq, n_heads, n_kv_heads, head_dim);
    FRT_CUDA_TRY(frt_pdl_launch(decode_prep_kernel, dim3(decode_prep_blocks(n_heads, n_kv_heads, head_dim)), dim3(PREP_THREADS), 0,
                                stream,
                             q, k, v, inv_freq, (__nv_bfloat16 *)k_cache, (__nv_bfloat16 *)v_cache, d_start,
                             max_seq, n_heads, n_kv_heads, head_dim));
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_dense_decode_prep_batch(void *stream, float *q, float *k, const float *v, const float *inv_freq,
                                           uint16_t *const *d_k_caches, uint16_t *const *d_v_caches,
                                           const int32_t *const *d_starts, int n_branches, int max_seq, int n_heads,
                                           int n_kv_heads, int head_dim)
{
    FRT_ARG(q && k && v && inv_freq && d_k_caches && d_v_caches && d_starts, "dense decode prep: NULL pointer");
    FRT_ARG(n_branches >= 1 && n_branches <= 65535 && max_seq >= 1 && n_heads >= 1 && n_kv_heads >= 1 &&
                head_dim >= 2 && head_dim <= 1024 && head_dim % 2 == 0,
            "dense decode prep: branches %d max_seq %d heads %d / %d head_dim %d", n_branches, max_seq, n_heads,
            n_kv_heads, head_dim);
    dim3 grid(decode_prep_blocks(n_heads, n_kv_heads, head_dim), (unsigned int)n_branches);
    FRT_CUDA_TRY(frt_pdl_launch(decode_prep_batch_kernel, grid, dim3(PREP_THREADS), 0, stream, q, k, v, inv_freq,
                             (__nv_bfloat16 *const *)d_k_caches, (__nv_bfloat16 *const *)d_v_caches, d_starts,
                             max_seq, n_heads, n_kv_heads, head_dim));
    FRT_LAUNCH_CHECK();
    return 0;
}
