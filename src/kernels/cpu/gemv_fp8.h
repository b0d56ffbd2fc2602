/*
 * kernels/cpu/gemv_fp8.h - the CPU twin of the E4M3-weight decode GEMV
 * (kernels/cuda/gemv_fp8.h; docs/fp8.md "FP8 weights").
 */
#ifndef FRT_KERNELS_CPU_GEMV_FP8_H
#define FRT_KERNELS_CPU_GEMV_FP8_H

#include <stdint.h>

/* y[t, r] (+)= (float)(sum_k x[t, k] * decode(w[r, k])) * scale[r], the sum
 * in double in ascending k (a reference: the GPU kernel sums in fp32 in
 * its own order), then one f32 product with the scale and, with
 * accumulate, one f32 addition of y. x [n, in] f32 (the bf16 values the
 * GPU reads, widened), w [out, in] E4M3 codes, scale [out] f32, y [n, out]
 * f32. The math of frt_cuda_gemv_fp8. */
void frt_cpu_matmul_fp8(float *y, const float *x, const uint8_t *w, const float *scale, int n, int in, int out,
                        int accumulate);

/* The 128 x 128 block-scaled form (frt_cuda_gemv_fp8_b128):
 * y[t, r] (+)= (float)(sum_b scale[r / 128][b] * sum_{k in block b} x[t, k] * decode(w[r, k]))
 * with b < ceil(in / 128), block b = k in [128 b, min(128 b + 128, in)),
 * scale [ceil(out / 128), ceil(in / 128)] f32 row-major; every sum in
 * double in ascending order (a reference), one rounding to f32, then with
 * accumulate one f32 addition of y. x [n, in] f32, w [out, in] E4M3, y
 * [n, out] f32. */
void frt_cpu_matmul_fp8_b128(float *y, const float *x, const uint8_t *w, const float *scale, int n, int in, int out,
                             int accumulate);

#endif /* FRT_KERNELS_CPU_GEMV_FP8_H */
