/*
 * kernels/cuda/fp8.cu - the OCP FP8 E4M3 scaled quantize / dequantize of
 * rows, the CUDA twin of kernels/cpu/fp8.h (same arguments, same bits):
 *   quantize:    q = __nv_cvt_float_to_fp8(x * inv, __NV_SATFINITE, __NV_E4M3),
 *                inv = __frcp_rn(scale[r % n_scales])  (IEEE 1.0f / s, as the CPU)
 *   dequantize:  x = float(__nv_cvt_fp8_to_halfraw(q, __NV_E4M3)) * scale[...]
 * The products are __fmul_rn (never contracted). cuda_fp8.h's satfinite
 * conversion is the CPU codec's rule (RNE, overflow and +-inf -> +-448, NaN
 * -> 0x7F); E4M3 -> half is exact. Scales are read from device memory (a
 * static KV scale lives there). One thread per element, grid-stride.
 * Tested bit-exact against the CPU codec in tests/test_cuda_fp8.c.
 *
 * Block-scaled weights to bf16 (frt_cuda_fp8_dequantize_b128_bf16, the
 * prefill GEMM's operand for block-wise checkpoints): decode(q) * s as above,
 * then __float2bfloat16_rn; twin frt_fp8_dequantize_b128_bf16.
 *
 * Per-token dynamic quantization (frt_cuda_fp8_quantize_rows_dynamic, the
 * activations of the FP8 prefill GEMM): one block per row of bf16; the
 * row's max |x| (a max: exact in any order; NaN skipped by fmaxf), scale =
 * amax / 448 (__fdiv_rn) with frt_fp8_amax_scale's rules (1 for a zero
 * row, inf clamped to FLT_MAX, at least FLT_MIN), then the codes as above
 * with inv = __frcp_rn(scale). Bit-exact twin: frt_fp8_quantize_rows_dynamic
 * on the bf16 values widened to f32 (tests/test_cuda_gemm_fp8.c).
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/fp8_util.h"
#include "kernels/cuda/kernels_policy_cuda.h"
#include "kernels/cuda/mma_util.h"
#include "kernels/cuda/policy_util.h"

#include <cuda_bf16.h>
#include <float.h>

__global__ void fp8_quantize_kernel(uint8_t *q, const float *x, const float *scale, int n_scales, size_t total,
                                    int dim)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        q[i] = frt_fp8_encode_inv(x[i], __frcp_rn(scale[(i / (size_t)dim) % (size_t)n_scales]));
    }
}

__global__ void fp8_dequantize_kernel(float *x, const uint8_t *q, const float *scale, int n_scales, size_t total,
                                      int dim)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        x[i] = frt_fp8_decode_scaled(q[i], scale[(i / (size_t)dim) % (size_t)n_scales]);
    }
}

#define FP8_ARGS(what)                                                                                   \
    FRT_ARG(q && x && scale, "cuda fp8 %s: NULL pointer", what);                                         \
    FRT_ARG(n_scales > 0 && rows >= 0 && dim > 0, "cuda fp8 %s: n_scales %d rows %d dim %d", what,      \
            n_scales, rows, dim)

extern "C" int frt_cuda_fp8_quantize_rows(void *stream, uint8_t *q, const float *x, const float *scale,
                                          int n_scales, int rows, int dim)
{
    FP8_ARGS("quantize");
    const size_t total = (size_t)rows * dim;
    if (!total) return 0;
    fp8_quantize_kernel<<<frt_grid_blocks(total, 256, 8192), 256, 0, (cudaStream_t)stream>>>(q, x, scale, n_scales,
                                                                                             total, dim);
    FRT_LAUNCH_CHECK();
    return 0;
}

extern "C" int frt_cuda_fp8_dequantize_rows(void *stream, float *x, const uint8_t *q, const float *scale,
                                            int n_scales, int rows, int dim)
{
    FP8_ARGS("dequantize");
    const size_t total = (size_t)rows * dim;
    if (!total) return 0;
    fp8_dequantize_kernel<<<frt_grid_blocks(total, 256, 8192), 256, 0, (cudaStream_t)stream>>>(
        x, q, scale, n_scales, total, dim);
    FRT_LAUNCH_CHECK();
    return 0;
}

/* The checks of the row kernels below: a, b (16-byte aligned) and scale
 * (4-byte aligned) non-NULL, rows >= 0, dim a positive multiple of mult. */
static int fp8_rows_check(const char *what, const void *a, const void *b, const float *scale, int rows, int dim,
                          int mult)
{
    FRT_ARG(a && b && scale, "cuda fp8 %s: NULL pointer", what);
    FRT_ARG(rows >= 0 && dim > 0 && dim % mult == 0, "cuda fp8 %s: rows %d dim %d (dim a positive multiple of %d)",
            what, rows, dim, mult);
    FRT_ARG((((uintptr_t)a | (uintptr_t)b) & 15) == 0 && ((uintptr_t)scale & 3) == 0,
            "cuda fp8 %s: the rows must be 16-byte aligned, the scales 4-byte aligned", what);
    return 0;
}

/* ---- 128 x 128 block-scaled weights to bf16 ------------------------------ */

/* One thread per 16 codes (a 16-byte load; the 16 share a 128 x 128 block):
 * out = __float2bfloat16_rn(frt_fp8_decode_scaled(q, s)), two 16-byte stores. */
__global__ void fp8_dequant_b128_kernel(uint4 *out, const uint4 *q, const float *scale, int rows, int dim)
{
    const int kc = dim / 16, nb = (dim + 127) / 128;
    const size_t total = (size_t)rows * kc;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / kc;
        const int c = (int)(i - r * kc) * 16;
        const float s = __ldg(scale + (r / 128) * nb + c / 128);
        const uint4 v = __ldg(q + i);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
        uint32_t o[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const uint32_t pair = (w[j / 2] >> (16 * (j & 1))) & 0xFFFFu;
            const __nv_bfloat162 b = __floats2bfloat162_rn(frt_fp8_decode_scaled((uint8_t)(pair & 0xFF), s),
                                                           frt_fp8_decode_scaled((uint8_t)(pair >> 8), s));
            o[j] = (uint32_t)__bfloat16_as_ushort(b.x) | ((uint32_t)__bfloat16_as_ushort(b.y) << 16);
        }
        out[2 * i] = make_uint4(o[0], o[1], o[2], o[3]);
        out[2 * i + 1] = make_uint4(o[4], o[5], o[6], o[7]);
    }
}

extern "C" int frt_cuda_fp8_dequantize_b128_bf16(void *stream, uint16_t *out, const uint8_t *q, const float *scale,
                                                 int rows, int dim)
{
    FRT_TRY(fp8_rows_check("dequantize_b128_bf16", out, q, scale, rows, dim, 16));
    const size_t total = (size_t)rows * (dim / 16);
    if (!total) return 0;
    fp8_dequant_b128_kernel<<<frt_grid_blocks(total, 256, 8192), 256, 0, (cudaStream_t)stream>>>(
        (uint4 *)out, (const uint4 *)q, scale, rows, dim);
    FRT_LAUNCH_CHECK();
    return 0;
}

/* ---- per-token dynamic quantization of bf16 rows ------------------------ */

#define DYN_THREADS 256

/* Eight bf16 values (one 16-byte load) widened to f32 (exact). */
__device__ __forceinline__ void bf16x8_to_f32(uint4 v, float f[8])
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
}

/* max(m, |f[j]|) over 8 values (fmaxf(m, NaN) == m: NaN skipped). */
__device__ __forceinline__ float amax8(float m, const float f[8])
{
    for (int j = 0; j < 8; j++) m = fmaxf(m, fabsf(f[j]));
    return m;
}

/* The row's max |x| over the block (NaN skipped), every thread gets it. */
__device__ float row_amax(const uint4 *xr, int n8)
{
    float m = 0.0f;
    for (int i = threadIdx.x; i < n8; i += blockDim.x) {
        float f[8];
        bf16x8_to_f32(xr[i], f);
        m = amax8(m, f);
    }
    return frt_block_max(m);
}

/* The E4M3 codes of 8 values at inv = 1 / scale, the first in the low byte. */
__device__ __forceinline__ uint2 encode8(const float f[8], float inv)
{
    uint32_t lo = 0, hi = 0;
    for (int j = 0; j < 4; j++) lo |= (uint32_t)frt_fp8_encode_inv(f[j], inv) << (8 * j);
    for (int j = 0; j < 4; j++) hi |= (uint32_t)frt_fp8_encode_inv(f[4 + j], inv) << (8 * j);
    return make_uint2(lo, hi);
}

__global__ void __launch_bounds__(DYN_THREADS)
    fp8_quantize_dyn_kernel(uint8_t *q, float *scale, const uint4 *x, int dim)
{
    const int n8 = dim / 8;
    const uint4 *xr = x + (size_t)blockIdx.x * n8;
    uint2 *qr = (uint2 *)(q + (size_t)blockIdx.x * dim);
    const float s = frt_fp8_amax_scale_dev(row_amax(xr, n8)), inv = __frcp_rn(s);
    if (threadIdx.x == 0) scale[blockIdx.x] = s;
    for (int i = threadIdx.x; i < n8; i += blockDim.x) {
        float f[8];
        bf16x8_to_f32(xr[i], f);
        qr[i] = encode8(f, inv);
    }
}

extern "C" int frt_cuda_fp8_quantize_rows_dynamic(void *stream, uint8_t *q, float *scale, const uint16_t *x,
                                                  int rows, int dim)
{
    FRT_TRY(fp8_rows_check("quantize_rows_dynamic", x, q, scale, rows, dim, 8));
    if (!rows) return 0;
    fp8_quantize_dyn_kernel<<<rows, DYN_THREADS, 0, (cudaStream_t)stream>>>(q, scale, (const uint4 *)x, dim);
    FRT_LAUNCH_CHECK();
    return 0;
}

/* ---- SwiGLU of FP8 accumulators, quantized per token --------------------- */

/* The block's row, staged as bf16 in shared memory sh_h [dim / 8] (m:
 * this thread's max |h| over its groups), quantized as
 * fp8_quantize_dyn_kernel quantizes a row: the block's amax, the scale to
 * scale[row], the codes to q's row. */
__device__ __forceinline__ void staged_row_quantize(uint8_t *q, float *scale, const uint4 *sh_h, float m, int dim)
{
    const int n8 = dim / 8;
    m = frt_block_max(m);
    const float sc = frt_fp8_amax_scale_dev(m), inv = __frcp_rn(sc);
    if (threadIdx.x == 0) scale[blockIdx.x] = sc;
    uint2 *qr = (uint2 *)(q + (size_t)blockIdx.x * dim);
    for (int i = threadIdx.x; i < n8; i += blockDim.x) {
        float f[8];
        bf16x8_to_f32(sh_h[i], f);
        qr[i] = encode8(f, inv);
    }
}



/* One block a row: g, u = the accumulators scaled as the FP8 GEMM's
 * epilogue, (acc * s_x[t]) * s_w[i]; h = bf16(silu(g) * u) staged in
 * shared memory; then the row's amax, scale and codes as
 * fp8_quantize_dyn_kernel computes them from h. */
template <bool B16>
__global__ void __launch_bounds__(DYN_THREADS)
    swiglu_fp8acc_quant_kernel(uint8_t *q, float *scale, const void *gate, const void *up, const float *sx,
                               const float4 *swg, const float4 *swu, int dim)
{
    extern __shared__ uint4 sh_h[]; /* the row's h, [dim / 8] groups of 8 bf16 */
    const int n8 = dim / 8, n4 = dim / 4;
    const size_t r4 = (size_t)blockIdx.x * n4;
    const float s = sx[blockIdx.x];
    float m = 0.0f;
    for (int i = threadIdx.x; i < n8; i += blockDim.x) {
        const int c = 2 * i;
        const uint2 lo = frt_fp8acc_swiglu4(frt_fp8acc_ld4<B16>(gate, r4 + c), frt_fp8acc_ld4<B16>(up, r4 + c), s,
                                            swg[c], swu[c]);
        const uint2 hi = frt_fp8acc_swiglu4(frt_fp8acc_ld4<B16>(gate, r4 + c + 1),
                                            frt_fp8acc_ld4<B16>(up, r4 + c + 1), s, swg[c + 1], swu[c + 1]);
        const uint4 v = make_uint4(lo.x, lo.y, hi.x, hi.y);
        sh_h[i] = v;
        float f[8];
        bf16x8_to_f32(v, f);
        m = amax8(m, f);
    }
    staged_row_quantize(q, scale, sh_h, m, dim);
}

#define SWQ_MAX_DIM 49152 /* the staged row: 96 KiB of shared memory */

extern "C" int frt_cuda_swiglu_fp8acc_quantize(void *stream, uint8_t *q, float *q_scale, const void *gate,
                                               const void *up, frt_cuda_dtype acc_dtype, const float *x_scale,
                                               const float *gate_scale, const float *up_scale, int rows, int dim)
{
    FRT_ARG(q && q_scale && gate && up && x_scale && gate_scale && up_scale,
            "cuda swiglu_fp8acc_quantize: NULL pointer");
    FRT_ARG(acc_dtype == FRT_CUDA_F32 || acc_dtype == FRT_CUDA_BF16, "cuda swiglu_fp8acc_quantize: bad dtype");
    FRT_ARG(rows >= 0 && dim > 0 && dim % 8 == 0 && dim <= SWQ_MAX_DIM,
            "cuda swiglu_fp8acc_quantize: rows %d dim %d (a multiple of 8, at most %d)", rows, dim, SWQ_MAX_DIM);
    FRT_ARG((((uintptr_t)gate | (uintptr_t)up | (uintptr_t)gate_scale | (uintptr_t)up_scale | (uintptr_t)q) & 15) ==
                    0 &&
                ((uintptr_t)q_scale & 3) == 0,
            "cuda swiglu_fp8acc_quantize: gate, up, the scales and q must be 16-byte aligned");
    if (!rows) return 0;
    const int smem = dim * 2;
    void (*k)(uint8_t *, float *, const void *, const void *, const float *, const float4 *, const float4 *, int) =
        acc_dtype == FRT_CUDA_BF16 ? swiglu_fp8acc_quant_kernel<true> : swiglu_fp8acc_quant_kernel<false>;
    FRT_CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    k<<<rows, DYN_THREADS, smem, (cudaStream_t)stream>>>(q, q_scale, gate, up, x_scale, (const float4 *)gate_scale,
                                                         (const float4 *)up_scale, dim);
    FRT_LAUNCH_CHECK();
    return 0;
}

/* ---- GeGLU of a bf16 gate | up product, quantized per token ------------- */

/* One block a row: h = bf16(gelu_tanh(g) * u) as frt_cuda_geglu_tanh's
 * bf16 store computes it (f32 arithmetic, one rounding), staged in shared
 * memory; then the row's amax, scale and codes as fp8_quantize_dyn_kernel
 * computes them from h. gu [rows, 2 dim]: gate's dim columns, then up's. */
__global__ void __launch_bounds__(DYN_THREADS) geglu_quant_kernel(uint8_t *q, float *scale, const uint4 *gu, int dim)
{
    extern __shared__ uint4 sh_h[]; /* the row's h, [dim / 8] groups of 8 bf16 */
    const int n8 = dim / 8;
    const uint4 *g = gu + (size_t)blockIdx.x * 2 * n8, *u = g + n8;
    float m = 0.0f;
    for (int i = threadIdx.x; i < n8; i += blockDim.x) {
        float a[8], b[8];
        bf16x8_to_f32(g[i], a);
        bf16x8_to_f32(u[i], b);
#pragma unroll
        for (int e = 0; e < 8; e++) a[e] = frt_gelu_tanh(a[e]) * b[e];
        const uint4 v = make_uint4(frt_pack_bf16(a[0], a[1]), frt_pack_bf16(a[2], a[3]), frt_pack_bf16(a[4], a[5]),
                                   frt_pack_bf16(a[6], a[7]));
        sh_h[i] = v;
        float f[8];
        bf16x8_to_f32(v, f);
        m = amax8(m, f);
    }
    staged_row_quantize(q, scale, sh_h, m, dim);
}

extern "C" int frt_cuda_geglu_quantize(void *stream, uint8_t *q, float *q_scale, const uint16_t *gu, int rows,
                                       int inter)
{
    FRT_ARG(q && q_scale && gu, "geglu_quantize: NULL pointer");
    FRT_ARG(rows >= 0 && inter > 0 && inter % 8 == 0 && inter <= SWQ_MAX_DIM,
            "geglu_quantize: rows %d inter %d (a multiple of 8, at most %d)", rows, inter, SWQ_MAX_DIM);
    FRT_ARG((((uintptr_t)gu | (uintptr_t)q) & 15) == 0 && ((uintptr_t)q_scale & 3) == 0,
            "geglu_quantize: gu and q must be 16-byte aligned, q_scale 4-byte aligned");
    if (!rows) return 0;
    const int smem = inter * 2;
    FRT_CUDA_TRY(cudaFuncSetAttribute(geglu_quant_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    geglu_quant_kernel<<<rows, DYN_THREADS, smem, (cudaStream_t)stream>>>(q, q_scale, (const uint4 *)gu, inter);
    FRT_LAUNCH_CHECK();
    return 0;
}
