/*
 * kernels/cuda/l2norm.cu - in-place L2 normalisation of rows,
 * x * rsqrt(sum x^2 + eps), on the Gated DeltaNet q and k.
 * Math: transformers 5.x modeling_qwen3_5.py, l2norm() (FLA-aligned), in the
 * order of the CPU twin frt_cpu_l2norm (sum in fp64, rounded to fp32, then
 * 1 / sqrtf(sum + eps)). One block per row; rows of tokens t >= *d_n exit.
 * Tested in tests/test_cuda_kernels.c.
 */
#include "kernels/cuda/cuda_util.h"

__global__ void l2norm_kernel(void *x, int x_dt, const int32_t *d_n, int max_n, int n_heads,
                              int dim, float eps)
{
    const size_t row = blockIdx.x;
    if ((int)(row / n_heads) >= frt_dyn_n(d_n, max_n)) return;
    const size_t o = row * dim;
    double ss = 0;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = frt_ld(x, x_dt, o + i);
        ss += (double)v * (double)v;
    }
    ss = frt_block_sum(ss);
    const float inv = 1.0f / sqrtf((float)ss + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        frt_st(x, x_dt, o + i, frt_ld(x, x_dt, o + i) * inv);
}

extern "C" int frt_cuda_l2norm(void *stream, void *x, frt_cuda_dtype x_dtype, const int32_t *d_n,
                               int max_n, int n_heads, int dim, float eps)
{
    FRT_ARG(x, "cuda l2norm: NULL pointer");
    FRT_ARG(frt_dtype_ok(x_dtype), "cuda l2norm: bad dtype");
    FRT_ARG(max_n >= 0 && n_heads > 0 && dim > 0, "cuda l2norm: max_n %d n_heads %d dim %d", max_n,
            n_heads, dim);
    FRT_ARG((long long)max_n * n_heads < (1ll << 31), "cuda l2norm: too many rows");
    if (max_n == 0) return 0;
    l2norm_kernel<<<(unsigned int)(max_n * n_heads), frt_norm_threads(dim), 0,
                    (cudaStream_t)stream>>>(x, x_dtype, d_n, max_n, n_heads, dim, eps);
    FRT_LAUNCH_CHECK();
    return 0;
}
