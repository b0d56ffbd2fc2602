/*
 * kernels/cuda/fp8_util.h - the OCP FP8 E4M3 scaled element conversions
 * shared by the CUDA kernels that read or write E4M3 (internal; CUDA C++
 * only): fp8.cu (rows), kv_append.cu (the KV cache append), attention.cu
 * (the FP8 KV cache read on load). The same two f32 operations as the CPU
 * codec (kernels/cpu/fp8.h, docs/fp8.md), so codes and values agree bit for
 * bit:
 *   encode:  __nv_cvt_float_to_fp8(x * inv, __NV_SATFINITE, __NV_E4M3),
 *            inv = __frcp_rn(scale) (IEEE 1.0f / s, as the CPU)
 *   decode:  float(e4m3 -> half, exact) * scale
 * The products are __fmul_rn (never contracted into an FMA).
 * Widening (the tensor-core attention over the FP8 KV cache, attention.cu
 * and flash_attention.cu): a code as bf16, unscaled; exact, since every
 * E4M3 value (3 mantissa bits, 2^-9 .. 448) is a bf16 value.
 */
#ifndef FRT_KERNELS_CUDA_FP8_UTIL_H
#define FRT_KERNELS_CUDA_FP8_UTIL_H

#include "kernels/cuda/cuda_util.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <float.h>
#include <stdint.h>

/* The per-token scale of a row whose max |x| is amax (frt_fp8_amax_scale,
 * kernels/cpu/fp8.h): amax / 448, 1 for an all-zero row, FLT_MAX / 448 for
 * an infinite max, at least FLT_MIN. */
__device__ __forceinline__ float frt_fp8_amax_scale_dev(float amax)
{
    if (amax == 0.0f) return 1.0f;
    if (amax > FLT_MAX) amax = FLT_MAX;
    const float s = __fdiv_rn(amax, 448.0f);
    return s < FLT_MIN ? FLT_MIN : s;
}

/* The E4M3 code of x / s, given inv = __frcp_rn(s). */
__device__ __forceinline__ uint8_t frt_fp8_encode_inv(float x, float inv)
{
    return (uint8_t)__nv_cvt_float_to_fp8(__fmul_rn(x, inv), __NV_SATFINITE, __NV_E4M3);
}

/* decode(q) * s. */
__device__ __forceinline__ float frt_fp8_decode_scaled(uint8_t q, float s)
{
    const __half h = __half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)q, __NV_E4M3));
    return __fmul_rn(__half2float(h), s);
}

/* Two adjacent codes (the low byte first in memory: .x) decoded and scaled. */
__device__ __forceinline__ float2 frt_fp8x2_decode_scaled(uint16_t q2, float s)
{
    const __half2 h = __half2(__nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)q2, __NV_E4M3));
    const float2 f = __half22float2(h);
    return make_float2(__fmul_rn(f.x, s), __fmul_rn(f.y, s));
}

/* Two adjacent codes (the low byte: the lower element) as bf16x2 bits,
 * exact: e4m3x2 -> f16x2 (exact) -> f32 -> bf16x2 (exact, the value is
 * representable). */
__device__ __forceinline__ uint32_t frt_fp8x2_to_bf16x2(uint32_t two)
{
    const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)two, __NV_E4M3)));
    const __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
    return *reinterpret_cast<const uint32_t *>(&b);
}

/* Eight codes (byte i of the pair, low word first: element i) as eight
 * bf16 (uint4 word i = elements 2 i, 2 i + 1), exact. */
__device__ __forceinline__ uint4 frt_fp8x8_to_bf16x8(uint2 q)
{
    return make_uint4(frt_fp8x2_to_bf16x2(q.x & 0xFFFFu), frt_fp8x2_to_bf16x2(q.x >> 16),
                      frt_fp8x2_to_bf16x2(q.y & 0xFFFFu), frt_fp8x2_to_bf16x2(q.y >> 16));
}

/* ---- the consumers of an FP8 GEMM's unscaled accumulators -----------------
 * (frt_cuda_gemm_fp8_run_acc, gemm_fp8.h: swiglu.cu, fp8.cu) */

/* Four accumulators at group i of 4: f32, or bf16 (B16) widened exactly. */
template <bool B16> __device__ __forceinline__ float4 frt_fp8acc_ld4(const void *p, size_t i)
{
    if constexpr (B16) {
        const uint2 v = static_cast<const uint2 *>(p)[i];
        return make_float4(__uint_as_float(v.x << 16), __uint_as_float(v.x & 0xFFFF0000u), __uint_as_float(v.y << 16),
                           __uint_as_float(v.y & 0xFFFF0000u));
    } else {
        return static_cast<const float4 *>(p)[i];
    }
}

/* The FP8 GEMM epilogue's scaling of one accumulator: (acc * s_x) * s_w. */
__device__ __forceinline__ float frt_fp8acc_scale(float acc, float sx, float sw)
{
    return __fmul_rn(__fmul_rn(acc, sx), sw);
}

/* bf16(silu(g) * u) of four gate / up accumulators scaled by the token's
 * sx and the channels' wg / wu, as 4 packed bf16 (frt_silu). */
__device__ __forceinline__ uint2 frt_fp8acc_swiglu4(float4 ga, float4 ua, float sx, float4 wg, float4 wu)
{
    const float g0 = frt_fp8acc_scale(ga.x, sx, wg.x), g1 = frt_fp8acc_scale(ga.y, sx, wg.y);
    const float g2 = frt_fp8acc_scale(ga.z, sx, wg.z), g3 = frt_fp8acc_scale(ga.w, sx, wg.w);
    const float u0 = frt_fp8acc_scale(ua.x, sx, wu.x), u1 = frt_fp8acc_scale(ua.y, sx, wu.y);
    const float u2 = frt_fp8acc_scale(ua.z, sx, wu.z), u3 = frt_fp8acc_scale(ua.w, sx, wu.w);
    const __nv_bfloat162 lo = __floats2bfloat162_rn(frt_silu(g0) * u0, frt_silu(g1) * u1);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(frt_silu(g2) * u2, frt_silu(g3) * u3);
    return make_uint2(*reinterpret_cast<const uint32_t *>(&lo), *reinterpret_cast<const uint32_t *>(&hi));
}

#endif /* FRT_KERNELS_CUDA_FP8_UTIL_H */
