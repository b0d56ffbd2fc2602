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
 */
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/fp8_util.h"

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
