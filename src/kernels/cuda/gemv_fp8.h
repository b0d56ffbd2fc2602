/*
 * kernels/cuda/gemv_fp8.h - the decode GEMV over OCP FP8 E4M3 weights with
 * one f32 scale per output channel or per 128 x 128 block (gemv_fp8.cu;
 * docs/fp8.md "FP8 weights"). C interface; the CPU twin is frt_cpu_matmul_fp8
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

/* frt_cuda_gemv_fp8 without accumulate (the same bits), skipped on the
 * device: every block reads *d_skip (int32, device memory, written by an
 * earlier kernel) first and returns when it is nonzero, writing nothing, so
 * one captured launch decides per replay (a prefill's FP8 LM head runs on
 * a call's last piece only, as frt_cuda_gemm_run_unless's). Errors: those
 * of frt_cuda_gemv_fp8; FRT_ERR_INVALID_ARGUMENT for a NULL d_skip. */
int frt_cuda_gemv_fp8_unless(void *stream, const int32_t *d_skip, void *y, frt_cuda_dtype y_dtype, const uint16_t *x,
                             const uint8_t *w, const float *scale, int n, int in_dim, int out_dim);

/* ---- fused forms (gemv.cu's frt_cuda_gemv_multi / _swiglu / _norm over
 * E4M3 weights): one launch for several products of one x, or for the
 * SwiGLU MLP's gate and up; each product's sums are those of
 * frt_cuda_gemv_fp8 on the same (in_dim, out_dim), so the outputs are the
 * same bits as the separate launches (and batch-invariant as they are).
 * The requirements of frt_cuda_gemv_fp8 apply (in_dim a positive multiple
 * of 16, 1 <= n <= FRT_CUDA_GEMV_MAX_N, 16-byte aligned x and weights,
 * 4-byte aligned scales, x in one block's shared memory). No allocation,
 * no synchronisation: legal inside a stream capture. Errors:
 * FRT_ERR_INVALID_ARGUMENT (checked before anything is enqueued: NULL
 * pointers, sizes, alignment, a y aliasing an input, two entries with one
 * y, a bad dtype), FRT_ERR_BACKEND (launch failure). */

/* An E4M3 matrix [out, in] with its per-row scales [out] f32 (device). */
typedef struct frt_cuda_gemv_fp8_mat {
    const uint8_t *w;
    const float *scale;
} frt_cuda_gemv_fp8_mat;

/* One product of frt_cuda_gemv_fp8_multi: y [n, out_dim] (y_dtype; bf16
 * rounds once, to nearest even) = (x . decode(w)^T) * scale[row]. */
typedef struct frt_cuda_gemv_fp8_entry {
    void *y;
    frt_cuda_dtype y_dtype;
    const uint8_t *w;   /* [out_dim, in_dim] E4M3 */
    const float *scale; /* [out_dim] f32 */
    int out_dim;        /* >= 1 */
} frt_cuda_gemv_fp8_entry;

/* y_i = (x . decode(w_i)^T) * scale_i for the n_entries (1 ..
 * FRT_CUDA_GEMV_MULTI_MAX) entries, all of one x [n, in_dim] bf16, in one
 * launch (the entries' grids end to end, as frt_cuda_gemv_multi): q_proj |
 * k_proj | v_proj. No accumulate form. The bits of frt_cuda_gemv_fp8 per
 * entry. Twin: frt_cpu_matmul_fp8 per entry. */
int frt_cuda_gemv_fp8_multi(void *stream, const frt_cuda_gemv_fp8_entry *entries, int n_entries,
                            const uint16_t *x, int n, int in_dim);

/* frt_cuda_gemv_fp8_multi of x = bf16(rmsnorm(norm->x, norm->w)) [n,
 * in_dim], the norm computed by every block into its shared-memory x (the
 * prologue of frt_cuda_gemv_multi_norm, frt_cuda_rmsnorm's arithmetic): the
 * same bits as frt_cuda_rmsnorm (bf16 out, n rows) followed by
 * frt_cuda_gemv_fp8_multi. Twin: frt_cpu_rmsnorm rounded to bf16, then
 * frt_cpu_matmul_fp8 per entry. */
int frt_cuda_gemv_fp8_multi_norm(void *stream, const frt_cuda_gemv_fp8_entry *entries, int n_entries,
                                 const frt_cuda_gemv_norm *norm, int n, int in_dim);

/* The SwiGLU MLP's first half in one launch: y[t, i] = silu(g) * u with
 * g = (x[t] . decode(gate.w[i])) * gate.scale[i] and u likewise from up
 * (f32, never stored; silu(g) = g / (1 + expf(-g)) as frt_cuda_swiglu),
 * rounded once to y_dtype. x [n, in_dim] bf16, gate / up [inter, in_dim]
 * E4M3 + [inter] scales, y [n, inter]. The same warps stream row i of both
 * matrices. Bits: frt_cuda_gemv_fp8 (f32 out) for gate and up, then
 * frt_cuda_swiglu. Twin: frt_cpu_matmul_fp8 x2, frt_cpu_swiglu. */
int frt_cuda_gemv_fp8_swiglu(void *stream, void *y, frt_cuda_dtype y_dtype, const uint16_t *x,
                             const frt_cuda_gemv_fp8_mat *gate, const frt_cuda_gemv_fp8_mat *up, int n, int in_dim,
                             int inter);

/* frt_cuda_gemv_fp8_swiglu of x = bf16(rmsnorm(norm->x, norm->w)), staged
 * per block as in frt_cuda_gemv_fp8_multi_norm: the bits of
 * frt_cuda_rmsnorm (bf16 out) followed by frt_cuda_gemv_fp8_swiglu. */
int frt_cuda_gemv_fp8_swiglu_norm(void *stream, void *y, frt_cuda_dtype y_dtype, const frt_cuda_gemv_norm *norm,
                                  const frt_cuda_gemv_fp8_mat *gate, const frt_cuda_gemv_fp8_mat *up, int n,
                                  int in_dim, int inter);

/* ---- 128 x 128 block scales (transformers `fp8` checkpoints,
 * weight_block_size [128, 128]; docs/fp8.md "FP8 weights"):
 *
 * y[t, r] (+)= sum over b < ceil(in_dim / 128) of
 *              (sum_{k in block b} x[t, k] * decode(w[r, k])) * scale[r / 128][b]
 * with scale [ceil(out_dim / 128), ceil(in_dim / 128)] f32 row-major
 * (device, 4-byte aligned; the checkpoint's weight_scale_inv, which
 * multiplies). The partial last block (in_dim % 128, a multiple of 16)
 * and the partial last row block are handled. Each 128-element block's
 * fp32 tensor-core sum is added to the row's fp32 sum as
 * fmaf(block_sum, scale, sum), blocks in ascending order within a warp's
 * slice, the slices then added as in frt_cuda_gemv_fp8. Everything else
 * (shapes, x, y, n, alignment, batch invariance, the bits of the fused
 * forms equal to the separate launches, errors) is as for the per-row
 * functions above, whose kernels these share but for the scale (the
 * per-row kernels' code is unchanged). CPU twin: frt_cpu_matmul_fp8_b128
 * (kernels/cpu/gemv_fp8.h). */
int frt_cuda_gemv_fp8_b128(void *stream, void *y, frt_cuda_dtype y_dtype, int accumulate, const uint16_t *x,
                           const uint8_t *w, const float *scale, int n, int in_dim, int out_dim);

/* frt_cuda_gemv_fp8_multi / _multi_norm with block-scaled entries (each
 * entry's scale is its [ceil(out_dim / 128), ceil(in_dim / 128)] table). */
int frt_cuda_gemv_fp8_b128_multi(void *stream, const frt_cuda_gemv_fp8_entry *entries, int n_entries,
                                 const uint16_t *x, int n, int in_dim);
int frt_cuda_gemv_fp8_b128_multi_norm(void *stream, const frt_cuda_gemv_fp8_entry *entries, int n_entries,
                                      const frt_cuda_gemv_norm *norm, int n, int in_dim);

/* frt_cuda_gemv_fp8_swiglu / _swiglu_norm with block-scaled gate and up
 * (scale: [ceil(inter / 128), ceil(in_dim / 128)] each). */
int frt_cuda_gemv_fp8_b128_swiglu(void *stream, void *y, frt_cuda_dtype y_dtype, const uint16_t *x,
                                  const frt_cuda_gemv_fp8_mat *gate, const frt_cuda_gemv_fp8_mat *up, int n,
                                  int in_dim, int inter);
int frt_cuda_gemv_fp8_b128_swiglu_norm(void *stream, void *y, frt_cuda_dtype y_dtype,
                                       const frt_cuda_gemv_norm *norm, const frt_cuda_gemv_fp8_mat *gate,
                                       const frt_cuda_gemv_fp8_mat *up, int n, int in_dim, int inter);

/* The most rows n (0 .. FRT_CUDA_GEMV_MAX_N) frt_cuda_gemv_fp8 takes at
 * in_dim on the current device: x [n, in_dim] bf16 fits one block's shared
 * memory (the device's opt-in limit, at most 227 KiB). 0 for in_dim < 1 or
 * when the device cannot be queried. */
int frt_cuda_gemv_fp8_max_n(int in_dim);

/* The launches above are persistent (frt_cuda_gemv_set_max_grid,
 * kernels_cuda.h). */

#ifdef __cplusplus
}
#endif

#endif /* FRT_KERNELS_CUDA_GEMV_FP8_H */
