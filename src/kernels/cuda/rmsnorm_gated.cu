/*
 * kernels/cuda/rmsnorm_gated.cu - the Gated DeltaNet output norm:
 * (w * rmsnorm(x)) * silu(z), plain weight.
 * Math: transformers 5.x modeling_qwen3_5.py, Qwen3_5RMSNormGated (norm
 * before gate), in the order of the CPU twin frt_cpu_rmsnorm_gated (sum of
 * squares in fp64). One block per row; rows of tokens t >= *d_n exit. As
 * rmsnorm.cu: each thread loads its groups of 4 elements of x, z and w into
 * registers (16-byte loads when aligned) before any arithmetic, so a row is
 * one memory round trip; the sum order depends on dim only. z may be read at
 * a token stride (frt_cuda_rmsnorm_gated_strided: the z columns of the
 * prefill's fused in_proj_qkv | z | b | a output). Rows of one warp's width
 * (head_dim 128) run 8 to a block, a warp each (the same bits). Tested in
 * tests/test_cuda_kernels.c, tests/test_cuda_decode.c.
 */
#include "kernels/cuda/norm_util.h"

/* One row: every thread loads its groups of x, z and w, then the fp64 sum
 * of squares (the block's: norm_sumsq; WARP, a row per warp: the same
 * per-thread sums and the warp butterfly, which is what frt_block_sum gives
 * a one-warp block: the same bits), then the output. */
template <int G, int NV, bool WARP>
__device__ __forceinline__ void gated_row(void *out, int out_dt, const void *x, int x_dt,
                                          const void *z, int z_dt, const float *__restrict__ w,
                                          size_t row, int n_heads, int dim, float eps,
                                          size_t z_stride, bool vec)
{
    const int t0 = WARP ? (int)(threadIdx.x & 31) : (int)threadIdx.x;
    const int nt = WARP ? 32 : (int)blockDim.x;
    const int groups = dim / G;
    const size_t o = row * dim, oz = row / n_heads * z_stride + row % n_heads * dim;
    float v[NV][G], zv[NV][G], wv[NV][G];
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int gi = t0 + k * nt;
        if (gi < groups) {
            norm_ld<G>(x, x_dt, o + (size_t)gi * G, vec, v[k]);
            norm_ld<G>(z, z_dt, oz + (size_t)gi * G, vec, zv[k]);
            norm_ld<G>(w, FRT_CUDA_F32, (size_t)gi * G, vec, wv[k]);
        }
    }
    double ss = 0;
    if constexpr (WARP) {
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (t0 + k * 32 < groups)
#pragma unroll
                for (int e = 0; e < G; e++) ss += (double)v[k][e] * (double)v[k][e];
        ss = frt_warp_sum(ss);
    } else {
        ss = norm_sumsq<G, NV>(v, groups);
    }
    const float inv = norm_inv_rms(ss, dim, eps);
    /* element i is read (x, z) and written by the same thread: safe in place */
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int gi = t0 + k * nt;
        if (gi < groups) {
            float y[G];
#pragma unroll
            for (int e = 0; e < G; e++) y[e] = (wv[k][e] * (v[k][e] * inv)) * frt_silu(zv[k][e]);
            norm_st<G>(out, out_dt, o + (size_t)gi * G, vec, y);
        }
    }
}

template <int G, int NV>
__global__ __launch_bounds__(NORM_MAX_THREADS) void rmsnorm_gated_kernel(
    void *out, int out_dt, const void *x, int x_dt, const void *z, int z_dt,
    const float *__restrict__ w, const int32_t *d_n, int max_n, int n_heads, int dim, float eps,
    size_t z_stride, bool vec)
{
    frt_pdl_wait(); /* launched with PDL (NORM_DISPATCH) */
    const size_t row = blockIdx.x;
    if ((int)(row / n_heads) >= frt_dyn_n(d_n, max_n)) return; /* uniform over the block */
    gated_row<G, NV, false>(out, out_dt, x, x_dt, z, z_dt, w, row, n_heads, dim, eps, z_stride, vec);
}

/* Rows of one warp (norm_shape_of gives 32 threads: dim <= 1024, e.g. the
 * DeltaNet's head_dim 128): 8 rows per block, warp w the row 8 blockIdx.x +
 * w, lane l the groups the one-warp block's thread l owns (the same bits as
 * rmsnorm_gated_kernel). */
#define GATED_WARP_ROWS 8
template <int G, int NV>
__global__ __launch_bounds__(32 * GATED_WARP_ROWS) void rmsnorm_gated_warp_kernel(
    void *out, int out_dt, const void *x, int x_dt, const void *z, int z_dt,
    const float *__restrict__ w, const int32_t *d_n, int max_n, int n_heads, int dim, float eps,
    size_t z_stride, bool vec)
{
    const size_t row = (size_t)blockIdx.x * GATED_WARP_ROWS + (threadIdx.x >> 5);
    if ((int)(row / n_heads) >= frt_dyn_n(d_n, max_n)) return; /* uniform over the warp */
    gated_row<G, NV, true>(out, out_dt, x, x_dt, z, z_dt, w, row, n_heads, dim, eps, z_stride, vec);
}

/* Rows too wide for the register path: a strided loop. */
__global__ void rmsnorm_gated_loop_kernel(void *out, int out_dt, const void *x, int x_dt,
                                          const void *z, int z_dt, const float *w,
                                          const int32_t *d_n, int max_n, int n_heads, int dim,
                                          float eps, size_t z_stride)
{
    const size_t row = blockIdx.x;
    if ((int)(row / n_heads) >= frt_dyn_n(d_n, max_n)) return;
    const size_t o = row * dim, oz = row / n_heads * z_stride + row % n_heads * dim;
    double ss = 0;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = frt_ld(x, x_dt, o + i);
        ss += (double)v * (double)v;
    }
    ss = frt_block_sum(ss);
    const float inv = norm_inv_rms(ss, dim, eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = frt_ld(x, x_dt, o + i), zz = frt_ld(z, z_dt, oz + i);
        frt_st(out, out_dt, o + i, (w[i] * (v * inv)) * frt_silu(zz));
    }
}

extern "C" int frt_cuda_rmsnorm_gated_strided(void *stream, void *out, frt_cuda_dtype out_dtype,
                                              const void *x, frt_cuda_dtype x_dtype, const void *z,
                                              frt_cuda_dtype z_dtype, int z_stride, const float *w,
                                              const int32_t *d_n, int max_n, int n_heads, int dim,
                                              float eps)
{
    FRT_ARG(out && x && z && w, "cuda rmsnorm_gated: NULL pointer");
    FRT_ARG(n_heads > 0 && dim > 0 && (long long)z_stride >= (long long)n_heads * dim,
            "cuda rmsnorm_gated: z stride %d < a token's %d x %d", z_stride, n_heads, dim);
    FRT_ARG(out != z || (long long)z_stride == (long long)n_heads * dim,
            "cuda rmsnorm_gated: out aliases a strided z");
    FRT_ARG(frt_dtype_ok(out_dtype) && frt_dtype_ok(x_dtype) && frt_dtype_ok(z_dtype),
            "cuda rmsnorm_gated: bad dtype");
    FRT_ARG(max_n >= 0 && n_heads > 0 && dim > 0, "cuda rmsnorm_gated: max_n %d n_heads %d dim %d",
            max_n, n_heads, dim);
    FRT_ARG((long long)max_n * n_heads < (1ll << 31), "cuda rmsnorm_gated: too many rows");
    FRT_ARG((out != x || out_dtype == x_dtype) && (out != z || out_dtype == z_dtype),
            "cuda rmsnorm_gated: in place needs equal dtypes");
    if (max_n == 0) return 0;
    const unsigned int rows = (unsigned int)(max_n * n_heads);
    const norm_shape sh = norm_shape_of(dim);
    if (sh.nv == 0) {
        rmsnorm_gated_loop_kernel<<<rows, 1024, 0, (cudaStream_t)stream>>>(
            out, out_dtype, x, x_dtype, z, z_dtype, w, d_n, max_n, n_heads, dim, eps, (size_t)z_stride);
    } else if (sh.g == 4 && sh.threads == 32 && rows >= 4 * GATED_WARP_ROWS) {
        const bool vec = norm_aligned(out, out_dtype) && norm_aligned(x, x_dtype) &&
                         norm_aligned(z, z_dtype) && norm_aligned(w, FRT_CUDA_F32) && z_stride % 4 == 0;
        const unsigned int grid = (rows + GATED_WARP_ROWS - 1) / GATED_WARP_ROWS;
        switch (sh.nv) {
        case 1:
            rmsnorm_gated_warp_kernel<4, 1><<<grid, 32 * GATED_WARP_ROWS, 0, (cudaStream_t)stream>>>(
                out, out_dtype, x, x_dtype, z, z_dtype, w, d_n, max_n, n_heads, dim, eps, (size_t)z_stride, vec);
            break;
        case 2:
            rmsnorm_gated_warp_kernel<4, 2><<<grid, 32 * GATED_WARP_ROWS, 0, (cudaStream_t)stream>>>(
                out, out_dtype, x, x_dtype, z, z_dtype, w, d_n, max_n, n_heads, dim, eps, (size_t)z_stride, vec);
            break;
        default:
            NORM_DISPATCH(4, rmsnorm_gated_kernel, rows, out, out_dtype, x, x_dtype, z, z_dtype, w,
                          d_n, max_n, n_heads, dim, eps, (size_t)z_stride, vec);
        }
    } else if (sh.g == 4) {
        const bool vec = norm_aligned(out, out_dtype) && norm_aligned(x, x_dtype) &&
                         norm_aligned(z, z_dtype) && norm_aligned(w, FRT_CUDA_F32) && z_stride % 4 == 0;
        NORM_DISPATCH(4, rmsnorm_gated_kernel, rows, out, out_dtype, x, x_dtype, z, z_dtype, w,
                      d_n, max_n, n_heads, dim, eps, (size_t)z_stride, vec);
    } else {
        NORM_DISPATCH(1, rmsnorm_gated_kernel, rows, out, out_dtype, x, x_dtype, z, z_dtype, w,
                      d_n, max_n, n_heads, dim, eps, (size_t)z_stride, false);
    }
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_rmsnorm_gated(void *stream, void *out, frt_cuda_dtype out_dtype,
                                      const void *x, frt_cuda_dtype x_dtype, const void *z,
                                      frt_cuda_dtype z_dtype, const float *w, const int32_t *d_n,
                                      int max_n, int n_heads, int dim, float eps)
{
    FRT_ARG(n_heads > 0 && dim > 0 && (long long)n_heads * dim < (1ll << 31),
            "cuda rmsnorm_gated: max_n %d n_heads %d dim %d", max_n, n_heads, dim);
    return frt_cuda_rmsnorm_gated_strided(stream, out, out_dtype, x, x_dtype, z, z_dtype, n_heads * dim, w, d_n,
                                          max_n, n_heads, dim, eps);
}
