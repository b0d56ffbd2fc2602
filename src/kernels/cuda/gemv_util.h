/*
 * kernels/cuda/gemv_util.h - what the cuBLASLt plans (gemm.cu) take from
 * frt's own decode GEMV (gemv.cu): a shape's launch configuration
 * (gemv_choose), the launch helper, and the constants the plan fingerprint
 * reports. Internal; CUDA C++ only.
 */
#ifndef FRT_KERNELS_CUDA_GEMV_UTIL_H
#define FRT_KERNELS_CUDA_GEMV_UTIL_H

#include "kernels/cuda/cuda_util.h"

#define GEMM_ALIGN 16 /* operand alignment, in bytes, of the GEMV and the cuBLASLt path */

#define GEMV_VERSION 3 /* bump when the arithmetic order changes (fingerprint) */
#define GEMV_LOADS 8   /* 16-byte weight loads in flight per lane (rows x k-blocks) */

typedef void (*gemv_fn)(void *y, int y_bf16, int accumulate, const uint4 *x, const uint4 *w,
                        int kc, int out_dim, int kw, const int32_t *d_skip);

struct gemv_cfg {
    int warps;  /* per block: 8 or 16 */
    int nr;     /* output rows per warp group: 8 (the mma's N) */
    int kw;     /* warps per group (in-block split of the row) */
    int blocks; /* grid */
    size_t smem;
    gemv_fn fn;
};

/* The launch configuration of a shape: a function of (n, in, out) only, so
 * the arithmetic order (and the fingerprint) is too (gemv.cu). */
void gemv_choose(int n, int in_dim, int out_dim, gemv_cfg *c);

#endif /* FRT_KERNELS_CUDA_GEMV_UTIL_H */
