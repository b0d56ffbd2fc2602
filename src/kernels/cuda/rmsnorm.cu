/*
 * kernels/cuda/rmsnorm.cu - RMSNorm over the last dimension (zero-centred
 * 1 + w and plain w), and the residual add fused with it.
 * Math: transformers 5.x modeling_qwen3_5.py, Qwen3_5RMSNorm; the same order
 * as the CPU twins frt_cpu_rmsnorm / frt_cpu_add: the sum of squares in fp64,
 * var = (float)(sum / dim), inv = 1 / sqrtf(var + eps), (x * inv) * (1 + w).
 * One block per row (token, head); rows of tokens t >= *d_n exit.
 * Tested in tests/test_cuda_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"

__global__ void rmsnorm_kernel(void *out, int out_dt, const void *x, int x_dt, const float *w,
                               const int32_t *d_n, int max_n, int n_heads, int dim, float eps,
                               int zero_centered)
{
    const size_t row = blockIdx.x;
    if ((int)(row / n_heads) >= frt_dyn_n(d_n, max_n)) return; /* uniform over the block */
    const size_t o = row * dim;
    double ss = 0;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = frt_ld(x, x_dt, o + i);
        ss += (double)v * (double)v;
    }
    ss = frt_block_sum(ss);
    const float var = (float)(ss / dim);
    const float inv = 1.0f / sqrtf(var + eps);
    /* element i is read and written by the same thread: safe in place */
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = frt_ld(x, x_dt, o + i);
        float y = zero_centered ? (v * inv) * (1.0f + w[i]) : (v * inv) * w[i];
        frt_st(out, out_dt, o + i, y);
    }
}

__global__ void add_rmsnorm_kernel(float *resid, const void *delta, int delta_dt, void *out,
                                   int out_dt, const float *w, const int32_t *d_n, int max_n,
                                   int dim, float eps, int zero_centered)
{
    const int t = blockIdx.x;
    if (t >= frt_dyn_n(d_n, max_n)) return;
    const size_t o = (size_t)t * dim;
    float *r = resid + o;
    double ss = 0;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = r[i] + frt_ld(delta, delta_dt, o + i);
        r[i] = v;
        ss += (double)v * (double)v;
    }
    ss = frt_block_sum(ss);
    const float var = (float)(ss / dim);
    const float inv = 1.0f / sqrtf(var + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = r[i]; /* written by this very thread above */
        float y = zero_centered ? (v * inv) * (1.0f + w[i]) : (v * inv) * w[i];
        frt_st(out, out_dt, o + i, y);
    }
}

extern "C" int frt_cuda_rmsnorm(void *stream, void *out, frt_cuda_dtype out_dtype, const void *x,
                                frt_cuda_dtype x_dtype, const float *w, const int32_t *d_n,
                                int max_n, int n_heads, int dim, float eps, int zero_centered)
{
    FRT_ARG(out && x && w, "cuda rmsnorm: NULL pointer");
    FRT_ARG(frt_dtype_ok(out_dtype) && frt_dtype_ok(x_dtype), "cuda rmsnorm: bad dtype");
    FRT_ARG(max_n >= 0 && n_heads > 0 && dim > 0, "cuda rmsnorm: max_n %d n_heads %d dim %d",
            max_n, n_heads, dim);
    FRT_ARG((long long)max_n * n_heads < (1ll << 31), "cuda rmsnorm: too many rows");
    FRT_ARG(out == x ? out_dtype == x_dtype : 1, "cuda rmsnorm: in place needs equal dtypes");
    if (max_n == 0) return 0;
    rmsnorm_kernel<<<(unsigned int)(max_n * n_heads), frt_norm_threads(dim), 0,
                     (cudaStream_t)stream>>>(out, out_dtype, x, x_dtype, w, d_n, max_n, n_heads,
                                             dim, eps, zero_centered);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_add_rmsnorm(void *stream, float *resid, const void *delta,
                                    frt_cuda_dtype delta_dtype, void *out,
                                    frt_cuda_dtype out_dtype, const float *w, const int32_t *d_n,
                                    int max_n, int dim, float eps, int zero_centered)
{
    FRT_ARG(resid && delta && out && w, "cuda add_rmsnorm: NULL pointer");
    FRT_ARG(frt_dtype_ok(out_dtype) && frt_dtype_ok(delta_dtype), "cuda add_rmsnorm: bad dtype");
    FRT_ARG(max_n >= 0 && dim > 0, "cuda add_rmsnorm: max_n %d dim %d", max_n, dim);
    FRT_ARG((void *)resid != out && delta != out, "cuda add_rmsnorm: out aliases an input");
    if (max_n == 0) return 0;
    add_rmsnorm_kernel<<<max_n, frt_norm_threads(dim), 0, (cudaStream_t)stream>>>(
        resid, delta, delta_dtype, out, out_dtype, w, d_n, max_n, dim, eps, zero_centered);
    FRT_LAUNCH_CHECK();
    return 0;
}
