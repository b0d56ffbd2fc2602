/*
 * kernels/cuda/rope.cu - rotary position embedding, rotate-half (NeoX) form,
 * on the first rot_dim dims of each head, in place.
 * Math: transformers 5.x modeling_qwen3_5.py, Qwen3_5TextRotaryEmbedding and
 * apply_rotary_pos_emb, as the CPU twin frt_cpu_rope: inv_freq is computed on
 * the host with the twin's expression (glibc powf) and passed by value, so
 * the fp32 angle pos * inv_freq is bit-identical; cos/sin are CUDA's cosf /
 * sinf (accurate versions, no fast math). Token t is at position
 * *d_start + t (device memory). One block per token: the cos/sin of the token
 * go to shared memory, then every (head, pair) is rotated.
 * Tested in tests/test_cuda_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"

#include <math.h>

struct rope_params {
    float inv_freq[FRT_CUDA_ROPE_MAX_ROT / 2];
};

__global__ void rope_kernel(void *x, int x_dt, const int32_t *d_start, const int32_t *d_n,
                            int max_n, int n_heads, int head_dim, int half, const rope_params p)
{
    __shared__ float cs[FRT_CUDA_ROPE_MAX_ROT / 2], sn[FRT_CUDA_ROPE_MAX_ROT / 2];
    const int t = blockIdx.x;
    if (t >= frt_dyn_n(d_n, max_n)) return; /* uniform over the block */
    const float pos = (float)(frt_dyn_pos(d_start) + t);
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        float a = pos * p.inv_freq[i];
        cs[i] = cosf(a);
        sn[i] = sinf(a);
    }
    __syncthreads();
    const size_t base = (size_t)t * n_heads * head_dim;
    for (int idx = threadIdx.x; idx < n_heads * half; idx += blockDim.x) {
        const int h = idx / half, i = idx % half;
        const size_t o = base + (size_t)h * head_dim + i;
        const float x1 = frt_ld(x, x_dt, o), x2 = frt_ld(x, x_dt, o + half);
        const float c = cs[i], s = sn[i];
        frt_st(x, x_dt, o, x1 * c + (-x2) * s);
        frt_st(x, x_dt, o + half, x2 * c + x1 * s);
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
    rope_kernel<<<max_n, 128, 0, (cudaStream_t)stream>>>(x, x_dtype, d_start, d_n, max_n, n_heads,
                                                         head_dim, half, p);
    FRT_LAUNCH_CHECK();
    return 0;
}
