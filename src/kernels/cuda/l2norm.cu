/*
 * kernels/cuda/l2norm.cu - in-place L2 normalisation of rows,
 * x * rsqrt(sum x^2 + eps), on the Gated DeltaNet q and k.
 * Math: transformers 5.x modeling_qwen3_5.py, l2norm() (FLA-aligned), in the
 * order of the CPU twin frt_cpu_l2norm (sum in fp64, rounded to fp32, then
 * 1 / sqrtf(sum + eps)). One block per row; rows of tokens t >= *d_n exit.
 * As rmsnorm.cu: each thread loads its groups of 4 elements into registers
 * (16-byte loads when aligned) before any arithmetic, so a row is one memory
 * round trip; the sum order depends on dim only. Tested in
 * tests/test_cuda_kernels.c, tests/test_cuda_decode.c.
 */
#include "kernels/cuda/norm_util.h"

template <int G, int NV>
__global__ __launch_bounds__(NORM_MAX_THREADS) void l2norm_kernel(void *x, int x_dt,
                                                                  const int32_t *d_n, int max_n,
                                                                  int n_heads, int dim, float eps,
                                                                  bool vec)
{
    frt_pdl_wait(); /* launched with PDL (NORM_DISPATCH) */
    const size_t row = blockIdx.x;
    if ((int)(row / n_heads) >= frt_dyn_n(d_n, max_n)) return; /* uniform over the block */
    const int groups = dim / G;
    const size_t o = row * dim;
    float v[NV][G];
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int gi = threadIdx.x + k * blockDim.x;
        if (gi < groups) norm_ld<G>(x, x_dt, o + (size_t)gi * G, vec, v[k]);
    }
    const double ss = norm_sumsq<G, NV>(v, groups);
    const float inv = norm_inv_l2(ss, eps);
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int gi = threadIdx.x + k * blockDim.x;
        if (gi < groups) {
            float y[G];
#pragma unroll
            for (int e = 0; e < G; e++) y[e] = v[k][e] * inv;
            norm_st<G>(x, x_dt, o + (size_t)gi * G, vec, y);
        }
    }
}

/* Rows too wide for the register path: a strided loop. */
__global__ void l2norm_loop_kernel(void *x, int x_dt, const int32_t *d_n, int max_n, int n_heads,
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
    const float inv = norm_inv_l2(ss, eps);
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
    const unsigned int rows = (unsigned int)(max_n * n_heads);
    const norm_shape sh = norm_shape_of(dim);
    if (sh.nv == 0) {
        l2norm_loop_kernel<<<rows, 1024, 0, (cudaStream_t)stream>>>(x, x_dtype, d_n, max_n,
                                                                    n_heads, dim, eps);
    } else if (sh.g == 4) {
        NORM_DISPATCH(4, l2norm_kernel, rows, x, x_dtype, d_n, max_n, n_heads, dim, eps,
                      norm_aligned(x, x_dtype));
    } else {
        NORM_DISPATCH(1, l2norm_kernel, rows, x, x_dtype, d_n, max_n, n_heads, dim, eps, false);
    }
    FRT_LAUNCH_CHECK();
    return 0;
}
