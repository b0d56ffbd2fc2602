/*
 * kernels/cuda/fp8_weights.cu - the prefill side of FP8 E4M3 weights
 * (gemv_fp8.h): the codes widened to bf16 for the bf16 GEMM (exact), and
 * the per-output-channel scales applied to the GEMM's f32 output. With
 * these the prefill product is (x . decode(W)^T) * s per column, the math
 * of the decode GEMV (gemv_fp8.cu). Tested in tests/test_cuda_gemv_fp8.c.
 */
#include "kernels/cuda/gemv_fp8.h"

#include "kernels/cuda/cuda_util.h"

#include <cuda_fp16.h>
#include <cuda_fp8.h>

/* 16 codes a thread: one 16-byte load, two 16-byte stores. */
__global__ void fp8_widen_kernel(uint4 *__restrict__ dst, const uint4 *__restrict__ src, size_t n16)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n16) return;
    const uint4 v = src[i];
    const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
    uint32_t o[8];
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const uint32_t two = (w4[k / 2] >> (16 * (k % 2))) & 0xFFFFu;
        const __half2 h = __half2(__nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)two, __NV_E4M3));
        const float2 f = __half22float2(h);
        const __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
        o[k] = (uint32_t)__bfloat16_as_ushort(b.x) | ((uint32_t)__bfloat16_as_ushort(b.y) << 16);
    }
    dst[2 * i] = make_uint4(o[0], o[1], o[2], o[3]);
    dst[2 * i + 1] = make_uint4(o[4], o[5], o[6], o[7]);
}

/* The last n % 16 codes, one a thread. */
__global__ void fp8_widen_tail_kernel(uint16_t *__restrict__ dst, const uint8_t *__restrict__ src, size_t from,
                                      size_t n)
{
    const size_t i = from + (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const __half h = __half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)src[i], __NV_E4M3));
    dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(__half2float(h)));
}

extern "C" int frt_cuda_fp8_widen_bf16(void *stream, uint16_t *dst, const uint8_t *src, size_t n)
{
    FRT_ARG(dst && src, "cuda fp8_widen_bf16: NULL pointer");
    if (n == 0) return 0;
    const bool vec = (((uintptr_t)dst | (uintptr_t)src) & 15) == 0;
    const size_t n16 = vec ? n / 16 : 0;
    if (n16) {
        fp8_widen_kernel<<<(unsigned)((n16 + 255) / 256), 256, 0, (cudaStream_t)stream>>>((uint4 *)dst,
                                                                                         (const uint4 *)src, n16);
        FRT_LAUNCH_CHECK();
    }
    const size_t rest = n - n16 * 16;
    if (rest) {
        fp8_widen_tail_kernel<<<(unsigned)((rest + 255) / 256), 256, 0, (cudaStream_t)stream>>>(dst, src, n16 * 16,
                                                                                               n);
        FRT_LAUNCH_CHECK();
    }
    return 0;
}

__global__ void scale_cols_kernel(float *__restrict__ y, const float *__restrict__ scale, int rows, int cols)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * cols) return;
    y[i] = __fmul_rn(y[i], __ldg(scale + i % (size_t)cols));
}

extern "C" int frt_cuda_scale_cols(void *stream, float *y, const float *scale, int rows, int cols)
{
    FRT_ARG(y && scale, "cuda scale_cols: NULL pointer");
    FRT_ARG(rows >= 1 && cols >= 1, "cuda scale_cols: rows %d cols %d", rows, cols);
    const size_t n = (size_t)rows * cols;
    scale_cols_kernel<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(y, scale, rows, cols);
    FRT_LAUNCH_CHECK();
    return 0;
}
