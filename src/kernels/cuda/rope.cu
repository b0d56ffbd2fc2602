/*
 * kernels/cuda/rope.cu - rotary position embedding, rotate-half (NeoX) form,
 * on the first rot_dim dims of each head, in place.
 * Math: transformers 5.x modeling_qwen3_5.py, Qwen3_5TextRotaryEmbedding and
 * apply_rotary_pos_emb, as the CPU twin frt_cpu_rope: inv_freq is computed on
 * the host with the twin's expression (glibc powf) and passed by value, so
 * the fp32 angle pos * inv_freq is bit-identical; cos/sin are CUDA's cosf /
 * sinf (accurate versions, no fast math). Token t is at position
 * *d_start + t (device memory). One block per token, threads sized so that
 * each holds ROPE_PPT (head, pair) rotations in registers: every x load of
 * the token is issued first, then the cos/sin of the token go to shared
 * memory, then the rotations are stored (one memory round trip, where a
 * loop of load-store pairs on the in-place buffer serialised them).
 * Tested in tests/test_cuda_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"

#include <math.h>

struct rope_params {
    float inv_freq[FRT_CUDA_ROPE_MAX_ROT / 2];
};

/* Pairs per thread held in registers: the x loads of a token are all issued
 * before the first store (one memory round trip). */
#define ROPE_PPT 2
#define ROPE_MAX_THREADS 512

__global__ __launch_bounds__(ROPE_MAX_THREADS) void rope_kernel(
    void *x, int x_dt, const int32_t *d_start, const int32_t *d_n, int max_n, int n_heads,
    int head_dim, int half, const rope_params p)
{
    __shared__ float cs[FRT_CUDA_ROPE_MAX_ROT / 2], sn[FRT_CUDA_ROPE_MAX_ROT / 2];
    const int t = blockIdx.x;
    if (t >= frt_dyn_n(d_n, max_n)) return; /* uniform over the block */
    const size_t base = (size_t)t * n_heads * head_dim;
    const int pairs = n_heads * half;
    for (int i0 = 0; i0 < pairs; i0 += ROPE_PPT * blockDim.x) {
        /* loads first (they do not depend on the position) */
        float x1[ROPE_PPT], x2[ROPE_PPT];
        size_t off[ROPE_PPT];
        int fi[ROPE_PPT];
#pragma unroll
        for (int k = 0; k < ROPE_PPT; k++) {
            const int idx = i0 + threadIdx.x + k * blockDim.x;
            fi[k] = -1;
            if (idx < pairs) {
                const int h = idx / half, i = idx - h * half;
                off[k] = base + (size_t)h * head_dim + i;
                fi[k] = i;
                x1[k] = frt_ld(x, x_dt, off[k]);
                x2[k] = frt_ld(x, x_dt, off[k] + half);
            }
        }
        if (i0 == 0) {
            const float pos = (float)(frt_dyn_pos(d_start) + t);
            for (int i = threadIdx.x; i < half; i += blockDim.x) {
                float a = pos * p.inv_freq[i];
                cs[i] = cosf(a);
                sn[i] = sinf(a);
            }
            __syncthreads();
        }
#pragma unroll
        for (int k = 0; k < ROPE_PPT; k++) {
            if (fi[k] < 0) continue;
            const float c = cs[fi[k]], s = sn[fi[k]];
            frt_st(x, x_dt, off[k], x1[k] * c + (-x2[k]) * s);
            frt_st(x, x_dt, off[k] + half, x2[k] * c + x1[k] * s);
        }
    }
}

extern "C" int frt_cuda_rope(void *stream, void *x, frt_cuda_dtype x_dtype,
                             const int32_t *d_start, const int32_t *d_n, int max_n, int n_heads,
                             int head_dim, int rot_dim, float theta)
{
    FRT_ARG(x && d_start, "cuda rope: NULL pointer");
    FRT_ARG(frt_dtype_ok(x_dtype), "cuda rope: bad dtype");
    FRT_ARG(max_n >= 0 && n_heads > 0 && head_dim > 0, "cuda rope: max_n %d n_heads %d head_dim %d",
            max_n, n_heads, head_dim);
    FRT_ARG(rot_dim >= 2 && rot_dim % 2 == 0 && rot_dim <= head_dim &&
                rot_dim <= FRT_CUDA_ROPE_MAX_ROT,
            "cuda rope: rot_dim %d (even, 2..min(head_dim %d, %d))", rot_dim, head_dim,
            FRT_CUDA_ROPE_MAX_ROT);
    FRT_ARG(theta > 0.0f, "cuda rope: theta %g", (double)theta);
    if (max_n == 0) return 0;
    rope_params p;
    const int half = rot_dim / 2;
    for (int i = 0; i < FRT_CUDA_ROPE_MAX_ROT / 2; i++)
        p.inv_freq[i] = i < half ? 1.0f / powf(theta, (float)(2 * i) / (float)rot_dim) : 0.0f;
    /* enough threads for every pair of a token in one round (ROPE_PPT each) */
    long long thr = ((long long)n_heads * half + ROPE_PPT - 1) / ROPE_PPT;
    thr = (thr + 31) / 32 * 32;
    const int threads = (int)(thr > ROPE_MAX_THREADS ? ROPE_MAX_THREADS : thr);
    rope_kernel<<<max_n, threads, 0, (cudaStream_t)stream>>>(x, x_dtype, d_start, d_n, max_n,
                                                             n_heads, head_dim, half, p);
    FRT_LAUNCH_CHECK();
    return 0;
}
