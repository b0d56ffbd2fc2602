/*
 * kernels/cuda/gemv_norm.h - what the bf16 decode GEMV (gemv.cu) and the
 * E4M3 one (gemv_fp8.cu) share beyond gemv_util.h: the RMSNorm prologue of
 * the _norm launchers (gemv_norm_stage: x = bf16(rmsnorm(resid)) staged in
 * shared memory, frt_cuda_rmsnorm's bits), the table of a multi-product
 * launch (the entries' grids laid end to end) and the host checks of the
 * fused launchers (defined in gemv.cu). Internal; CUDA C++ only, included
 * by those two .cu files.
 */
#ifndef FRT_KERNELS_CUDA_GEMV_NORM_H
#define FRT_KERNELS_CUDA_GEMV_NORM_H

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/norm_util.h"

/* The RMSNorm prologue of the _norm launchers (bf16 and E4M3 weights):
 *
 * x[t, :] = bf16(rmsnorm(resid[t, :])) for t < N, computed by every block
 * into its shared x instead of copying a bf16 x from global memory, with the
 * arithmetic of rmsnorm.cu (frt_cuda_rmsnorm / frt_cuda_add_rmsnorm):
 *   ss  = the fp64 sum of squares of the row
 *   var = (float)(ss / dim),  inv = 1.0f / sqrtf(var + eps)
 *   y   = (x * inv) * (1.0f + w)   (zero-centred; (x * inv) * w otherwise)
 * rounded to bf16 (RNE). The fp64 sum is added in the order of rmsnorm.cu's
 * launch for this dim (norm_shape_of: T threads owning groups of G elements
 * i, i + T, ...; dim > 16384: the strided loop of 1024 threads, G = 1): the
 * block plays those T "virtual threads" (virtual thread v is thread v mod
 * (WARPS * 32), virtual warp v / 32 is a whole warp of the block), each sums
 * its groups in order, a xor butterfly per virtual warp, then one butterfly
 * over the T / 32 warp sums (zeros past them): frt_block_sum's order. Every
 * operation is the one rmsnorm.cu performs on the same operands, so the
 * bf16 x is the same bits as frt_cuda_rmsnorm's bf16 output. */
struct gemv_norm_args {
    const float *x; /* [N, dim] f32 residual rows (device; 16-byte aligned) */
    const float *w; /* [dim] f32 norm weight (16-byte aligned) */
    float eps;
    int zc;      /* zero-centred: (1 + w) */
    int threads; /* T: rmsnorm.cu's threads for dim (a multiple of 32, <= 1024) */
    int g;       /* G: elements per group, 4 or 1 */
};

/* Stages xs [N, kc] (chunks of 8 bf16) from nm; part: N * 32 doubles of
 * shared memory. Ends with the chunks stored (the caller syncs). */
template <int N, int WARPS>
__device__ __forceinline__ void gemv_norm_stage(uint4 *xs, double *part, const gemv_norm_args &nm,
                                                int kc)
{
    const int lane = threadIdx.x & 31, dim = kc * 8, T = nm.threads, G = nm.g;
    const int groups = dim / G;
    /* pass 1: each virtual thread's fp64 sum of its groups, in order (4 loads
     * in flight per batch), then the virtual warp's butterfly */
#pragma unroll
    for (int t = 0; t < N; t++) {
        const float *xr = nm.x + (size_t)t * dim;
        for (int vt = threadIdx.x; vt < T; vt += WARPS * 32) { /* warp-uniform (T % 32 == 0) */
            double ss = 0;
            for (int g0 = vt; g0 < groups; g0 += 4 * T) {
                float v[4][4];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const int gi = g0 + k * T;
                    if (gi < groups) {
                        if (G == 4) {
                            const float4 f = __ldg((const float4 *)xr + gi);
                            v[k][0] = f.x, v[k][1] = f.y, v[k][2] = f.z, v[k][3] = f.w;
                        } else {
                            v[k][0] = __ldg(xr + gi);
                            v[k][1] = v[k][2] = v[k][3] = 0.0f;
                        }
                    }
                }
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    if (g0 + k * T < groups) {
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            if (e < G) ss += (double)v[k][e] * (double)v[k][e];
                    }
                }
            }
            ss = frt_warp_sum(ss);
            if (lane == 0) part[t * 32 + (vt >> 5)] = ss;
        }
    }
    __syncthreads();
    /* every warp: the sum over the T / 32 virtual warps, then rstd */
    float inv[N];
#pragma unroll
    for (int t = 0; t < N; t++) {
        double s = lane < (T >> 5) ? part[t * 32 + lane] : 0.0;
        s = frt_warp_sum(s);
        inv[t] = norm_inv_rms(s, dim, nm.eps);
    }
    /* pass 2: chunk i = 8 elements of row i / kc (the row mostly in L1 now) */
    for (int i = threadIdx.x; i < N * kc; i += WARPS * 32) {
        const int t = i / kc, c = i - t * kc;
        float iv = inv[0];
#pragma unroll
        for (int u = 1; u < N; u++)
            if (t == u) iv = inv[u]; /* static indices: inv stays in registers */
        const float4 *xp = (const float4 *)nm.x + 2 * (size_t)i;
        const float4 *wp = (const float4 *)nm.w + 2 * c;
        const float4 a0 = __ldg(xp), a1 = __ldg(xp + 1), w0 = __ldg(wp), w1 = __ldg(wp + 1);
        const float xv[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        const float wv[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
        uint32_t u32[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float y[2];
#pragma unroll
            for (int h = 0; h < 2; h++) y[h] = norm_weigh(xv[2 * j + h], iv, wv[2 * j + h], nm.zc);
            const __nv_bfloat162 b = __floats2bfloat162_rn(y[0], y[1]); /* .x: the lower index */
            u32[j] = (uint32_t)__bfloat16_as_ushort(b.x) |
                     ((uint32_t)__bfloat16_as_ushort(b.y) << 16);
        }
        xs[i] = make_uint4(u32[0], u32[1], u32[2], u32[3]);
    }
}

/* Shared memory of the RMSNorm prologue (the N x 32 virtual-warp sums). */
#define GEMV_NORM_SMEM(N) ((size_t)(N) * 32 * sizeof(double))

/* One product of a multi-product launch. */
struct gemv_multi_entry {
    void *y;
    const uint4 *w;     /* [out_dim, in] bf16, or E4M3 codes (gemv_fp8.cu) */
    const float *s;     /* E4M3: [out_dim] per-row scales; NULL for bf16 */
    int out_dim, y_bf16, kw;
    int rows;           /* output rows per block (host: the grid and the order) */
};

struct gemv_multi_table {
    gemv_multi_entry e[FRT_CUDA_GEMV_MULTI_MAX];
    int begin[FRT_CUDA_GEMV_MULTI_MAX]; /* first block of each entry; begin[0] = 0 */
    int count;
};

/* Block blockIdx.x's entry of the table and its index among that entry's
 * blocks (block-uniform; static indices only: a dynamic one would copy the
 * table to local memory). */
__device__ __forceinline__ gemv_multi_entry gemv_multi_find(const gemv_multi_table &tab, int *blk)
{
    gemv_multi_entry m = tab.e[0];
    int b0 = 0;
#pragma unroll
    for (int i = 1; i < FRT_CUDA_GEMV_MULTI_MAX; i++)
        if (i < tab.count && (int)blockIdx.x >= tab.begin[i]) {
            m = tab.e[i];
            b0 = tab.begin[i];
        }
    *blk = (int)blockIdx.x - b0;
    return m;
}

/* The input of a fused launcher: norm NULL: x [n, in_dim] bf16 read (NULL,
 * n outside [1, FRT_CUDA_GEMV_MAX_N], in_dim not a positive multiple of 8,
 * x not 16-byte aligned: FRT_ERR_INVALID_ARGUMENT); else x =
 * bf16(rmsnorm(norm->x, norm->w)), *na its kernel arguments (the launch
 * shape of rmsnorm.cu for in_dim), norm->x / norm->w NULL or misaligned:
 * FRT_ERR_INVALID_ARGUMENT. */
int gemv_input_check(const char *what, const uint16_t *x, const frt_cuda_gemv_norm *norm, int n, int in_dim,
                     gemv_norm_args *na);

/* Entry i of a multi-product launch: y and w non-NULL, y_dtype valid,
 * out_dim >= 1, w 16-byte aligned, y aligned for its dtype, y not aliasing
 * w, x or the norm's inputs; else FRT_ERR_INVALID_ARGUMENT. */
int gemv_entry_check(const char *what, int i, const void *y, frt_cuda_dtype y_dtype, const void *w, int out_dim,
                     const void *x, const frt_cuda_gemv_norm *norm);

/* The table of n_entries entries (each with its kw and rows set): ordered
 * by rows per block, largest first (stable: the long blocks start first,
 * the short ones fill the tail), begin[] their prefix sums; *total the
 * grid. FRT_ERR_INVALID_ARGUMENT for a grid past 2^31 - 1 blocks. */
int gemv_multi_layout(const char *what, const gemv_multi_entry *ent, int n_entries, gemv_multi_table *tab,
                      long *total);

/* Makes smem bytes of dynamic shared memory available to fn (beyond 48 KiB:
 * up to the device's opt-in limit, at most 227 KiB; FRT_ERR_INVALID_ARGUMENT
 * past it, FRT_ERR_BACKEND when the device cannot be queried). */
int gemv_smem_ready(const char *what, const void *fn, size_t smem);

#endif /* FRT_KERNELS_CUDA_GEMV_NORM_H */
