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
        float *xh = x + th * head_dim;
        const float a = (float)(start + t) * inv_freq[p];
        const float c = cosf(a), s = sinf(a);
        const float x1 = xh[p], x2 = xh[p + half];
        xh[p] = x1 * c + (-x2) * s;
        xh[p + half] = x2 * c + x1 * s;
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
