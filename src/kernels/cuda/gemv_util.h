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
                        int kc, int out_dim, int kw, const int32_t *d_skip, int nvb, int red_on_x);

struct gemv_cfg {
    int warps;  /* per block: 8 or 16 */
    int nr;     /* output rows per warp group: 8 (the mma's N) */
    int kw;     /* warps per group (in-block split of the row) */
    int blocks; /* blocks of work (the configuration; the fingerprint's gemv_blocks) */
    size_t smem; /* one block of work a block: x (or the cross-warp sums) and the ring */
    size_t smem_loop; /* persistent: x and the cross-warp sums side by side (0: the ring path, not persistent) */
    gemv_fn fn;
    /* set by gemv_plan (gemm.cu) through gemv_layout: the launch */
    unsigned grid;
    size_t smem_run;
    int red_on_x;
};

/* The launch configuration of a shape: a function of (n, in, out) only, so
 * the arithmetic order (and the fingerprint) is too (gemv.cu). */
void gemv_choose(int n, int in_dim, int out_dim, gemv_cfg *c);

/* How a launch of fn (threads a block) over nvb blocks of work runs: */
struct gemv_launch {
    unsigned grid; /* blocks: the resident blocks (at most nvb) when persistent, else nvb */
    size_t smem;   /* dynamic shared memory */
    int red_on_x;  /* 1: one block of work a block, the cross-warp sums over x */
};

/* Persistent when loop_smem is not 0 and fits the device's opt-in limit (the grid: SMs x
 * the blocks of fn an SM holds at loop_smem, at most nvb and the cap of
 * frt_cuda_gemv_set_max_grid), else one block of work a block at
 * block_smem; fn's shared-memory limit raised as gemv_smem_ready does
 * (its errors; block_smem past 227 KiB is FRT_ERR_INVALID_ARGUMENT before
 * the device is queried). The bits do not depend on the grid. */
int gemv_layout(const char *what, const void *fn, int threads, size_t loop_smem, size_t block_smem, long nvb,
                gemv_launch *l);


#endif /* FRT_KERNELS_CUDA_GEMV_UTIL_H */
