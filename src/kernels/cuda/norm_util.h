/*
 * kernels/cuda/norm_util.h - what the row-norm kernels share (rmsnorm.cu,
 * rmsnorm_gated.cu, l2norm.cu, attn_decode_prep.cu): the launch shape of a
 * row (norm_shape_of, a function of the row width only, so the fp64 sum
 * order and the bits depend on dim alone) and the 4-element loads and stores
 * that are vectorised when aligned and scalar otherwise, with the same
 * element ownership. Device code, included by .cu files only.
 */
#ifndef FRT_KERNELS_CUDA_NORM_UTIL_H
#define FRT_KERNELS_CUDA_NORM_UTIL_H

#include "kernels/cuda/cuda_util.h"

#define NORM_MAX_NV 8        /* groups per thread of the register path */
#define NORM_MAX_THREADS 512 /* threads of the register path (<= 128 registers each) */

struct __align__(8) norm_bf16x4 {
    __nv_bfloat162 a, b;
};

/* Elements [i, i + G) of a buffer of dtype dt into v; vec: one 16-byte (f32)
 * or 8-byte (bf16) load (G == 4, aligned), else G scalar loads. */
template <int G>
__device__ __forceinline__ void norm_ld(const void *p, int dt, size_t i, bool vec, float (&v)[G])
{
    if constexpr (G == 4) {
        if (vec) {
            if (dt == FRT_CUDA_BF16) {
                const norm_bf16x4 u = *(const norm_bf16x4 *)((const __nv_bfloat16 *)p + i);
                const float2 a = __bfloat1622float2(u.a), b = __bfloat1622float2(u.b);
                v[0] = a.x;
                v[1] = a.y;
                v[2] = b.x;
                v[3] = b.y;
            } else {
                const float4 f = *(const float4 *)((const float *)p + i);
                v[0] = f.x;
                v[1] = f.y;
                v[2] = f.z;
                v[3] = f.w;
            }
            return;
        }
    }
#pragma unroll
    for (int e = 0; e < G; e++) v[e] = frt_ld(p, dt, i + e);
}

template <int G>
__device__ __forceinline__ void norm_st(void *p, int dt, size_t i, bool vec, const float (&v)[G])
{
    if constexpr (G == 4) {
        if (vec) {
            if (dt == FRT_CUDA_BF16) {
                norm_bf16x4 u;
                u.a = __floats2bfloat162_rn(v[0], v[1]);
                u.b = __floats2bfloat162_rn(v[2], v[3]);
                *(norm_bf16x4 *)((__nv_bfloat16 *)p + i) = u;
            } else {
                *(float4 *)((float *)p + i) = make_float4(v[0], v[1], v[2], v[3]);
            }
            return;
        }
    }
#pragma unroll
    for (int e = 0; e < G; e++) frt_st(p, dt, i + e, v[e]);
}

/* The launch shape of a row of dim elements: groups of G (4 when dim % 4 ==
 * 0), T threads (a multiple of 32, about 4 groups each, at most
 * NORM_MAX_THREADS), NV groups per thread (1, 2, 4 or NORM_MAX_NV); nv 0:
 * too wide (dim > 16384), the strided loop. */
struct norm_shape {
    int g, threads, nv;
};

static norm_shape norm_shape_of(int dim)
{
    norm_shape s;
    s.g = dim % 4 == 0 ? 4 : 1;
    const long long groups = dim / s.g;
    long long t = (groups + 3) / 4;
    t = (t + 31) / 32 * 32;
    s.threads = (int)(t < 32 ? 32 : (t > NORM_MAX_THREADS ? NORM_MAX_THREADS : t));
    const long long per = (groups + s.threads - 1) / s.threads;
    s.nv = per <= 1 ? 1 : per <= 2 ? 2 : per <= 4 ? 4 : per <= NORM_MAX_NV ? NORM_MAX_NV : 0;
    return s;
}

static bool norm_aligned(const void *p, frt_cuda_dtype dt)
{
    return ((uintptr_t)p % (4 * frt_dtype_bytes(dt))) == 0;
}

/* The fp64 sum of squares of a row held in registers: each thread's owned
 * groups (threadIdx.x + k T, k < NV, below `groups`) in order, then
 * frt_block_sum. Every thread of the block gets the row's sum. */
template <int G, int NV>
__device__ __forceinline__ double norm_sumsq(const float (&v)[NV][G], int groups)
{
    double ss = 0;
#pragma unroll
    for (int k = 0; k < NV; k++)
        if (threadIdx.x + k * blockDim.x < groups)
#pragma unroll
            for (int e = 0; e < G; e++) ss += (double)v[k][e] * (double)v[k][e];
    return frt_block_sum(ss);
}


/* 1 / sqrt(mean square + eps) of a row of dim elements whose fp64 sum of
 * squares is ss: the one expression of every RMSNorm (rmsnorm, the gated
 * norm, the attention prep, the GEMV prologue, the DeltaNet decode step), so
 * their bits agree by construction. */
__device__ __forceinline__ float norm_inv_rms(double ss, int dim, float eps)
{
    const float var = (float)(ss / dim);
    return 1.0f / sqrtf(var + eps);
}

/* 1 / sqrt(sum of squares + eps), the sum in fp64 rounded to fp32: the L2
 * norm of frt_cpu_l2norm (l2norm, the fused conv, the DeltaNet decode step). */
__device__ __forceinline__ float norm_inv_l2(double ss, float eps)
{
    return 1.0f / sqrtf((float)ss + eps);
}

/* The RMSNorm weight of Qwen3.5: (x * inv) * (1 + w) zero-centred, else
 * (x * inv) * w. */
__device__ __forceinline__ float norm_weigh(float x, float inv, float w, int zero_centered)
{
    return zero_centered ? (x * inv) * (1.0f + w) : (x * inv) * w;
}

/* Launches KERNEL<G, NV> with the NV of the shape sh in scope (1, 2, 4 or
 * NORM_MAX_NV), on `stream` in scope. */
/* Launches KERNEL<G, sh.nv> with programmatic dependent launch
 * (frt_pdl_launch): every norm kernel calls frt_pdl_wait first. */
#define NORM_LAUNCH(K, GRID, ...)                                                                           \
    FRT_CUDA_TRY(frt_pdl_launch(K, dim3(GRID), dim3(sh.threads), 0, stream, __VA_ARGS__))
#define NORM_DISPATCH(G, KERNEL, GRID, ...)                                                     \
    do {                                                                                        \
        switch (sh.nv) {                                                                        \
        case 1: NORM_LAUNCH((KERNEL<G, 1>), GRID, __VA_ARGS__); break;                            \
        case 2: NORM_LAUNCH((KERNEL<G, 2>), GRID, __VA_ARGS__); break;                            \
        case 4: NORM_LAUNCH((KERNEL<G, 4>), GRID, __VA_ARGS__); break;                            \
        default: NORM_LAUNCH((KERNEL<G, NORM_MAX_NV>), GRID, __VA_ARGS__); break;                 \
        }                                                                                       \
    } while (0)

#endif
