/*
 * kernels/cuda/gemv_fp8.h - the decode GEMV over OCP FP8 E4M3 weights with
 * one f32 scale per output channel (gemv_fp8.cu; docs/fp8.md "FP8
 * weights"). C interface; the CPU twin is frt_cpu_matmul_fp8
 * (kernels/cpu/gemv_fp8.h).
 */
#ifndef FRT_KERNELS_CUDA_GEMV_FP8_H
#define FRT_KERNELS_CUDA_GEMV_FP8_H

#include "kernels/cuda/kernels_cuda.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[t, r] (+)= (sum_k x[t, k] * decode(w[r, k])) * scale[r]
 * for t < n, r < out_dim:
 *   x      [n, in_dim] bf16 (device, 16-byte aligned), 1 <= n <= FRT_CUDA_GEMV_MAX_N;
 *   w      [out_dim, in_dim] E4M3 codes, row-major (device, 16-byte aligned);
 *   scale  [out_dim] f32 (device, 4-byte aligned): the output channel's scale;
 *   y      [n, out_dim] f32 or bf16 (y_dtype; bf16 rounds once, to nearest
 *          even); accumulate: y = fl(product) + y, read in y's dtype.
 * in_dim a positive multiple of 16; n * in_dim * 2 bytes of x fit one
 * block's shared memory (as frt_cuda_gemv_multi's x). Each code is widened
 * to bf16 in registers (exact: every E4M3 value is a bf16 value), the sums
 * run on the tensor cores (mma m16n8k16, bf16 in, fp32 accumulators, the
 * tokens as M, 8 weight rows as N) and the f32 sum is multiplied by
 * scale[r] (__fmul_rn) in the epilogue. The order of every sum depends on
 * (in_dim, out_dim) only: the same bits for every n (a row's result does
 * not depend on the rows beside it) and run to run. No allocation, no
 * synchronisation: legal inside a stream capture.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL pointers, n, in_dim or out_dim out
 * of range, misalignment, y overlapping an input, a bad dtype; checked
 * before anything is enqueued), FRT_ERR_BACKEND (a launch failure). */
int frt_cuda_gemv_fp8(void *stream, void *y, frt_cuda_dtype y_dtype, int accumulate, const uint16_t *x,
                      const uint8_t *w, const float *scale, int n, int in_dim, int out_dim);

/* The most rows n (0 .. FRT_CUDA_GEMV_MAX_N) frt_cuda_gemv_fp8 takes at
 * in_dim on the current device: x [n, in_dim] bf16 fits one block's shared
 * memory (the device's opt-in limit, at most 227 KiB). 0 for in_dim < 1 or
 * when the device cannot be queried. */
int frt_cuda_gemv_fp8_max_n(int in_dim);

#ifdef __cplusplus
}
#endif

#endif /* FRT_KERNELS_CUDA_GEMV_FP8_H */
