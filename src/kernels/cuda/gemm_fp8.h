/*
 * kernels/cuda/gemm_fp8.h - the FP8 prefill GEMM (gemm_fp8.cu; docs/fp8.md
 * "FP8 weights"): E4M3 activations with one scale per token times E4M3
 * weights with one scale per output channel, through cuBLASLt:
 *
 *   y[t, o] = (sum_k decode(xq[t, k]) * decode(wq[o, k])) * s_x[t] * s_w[o]
 *
 * fp32 accumulation, f32 or bf16 output. The scales are applied by the
 * library (cublasLt.h, CUDA 13 / cuBLAS 13.1:
 * CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F on A and B, "each (i, j)-th
 * element of product of A and B is multiplied by i-th element of A scale
 * and j-th element of B scale"; outer-vector FP8 scaling on Hopper since
 * cuBLAS 12.9). Where cuBLASLt has no such algorithm for a shape (or
 * frt_cuda_gemm_fp8_set_scaling asks for it), the plan runs cuBLASLt with
 * unit scales into the f32 accumulator output and frt's epilogue kernel
 * multiplies it, y = (acc * s_x[t]) * s_w[o] (two __fmul_rn); f32 out
 * only. Each plan says which (scales_in_library). The activations come from
 * frt_cuda_fp8_quantize_rows_dynamic (kernels_cuda.h). C interface; the
 * CPU reference is dequantize-both then an f32 matmul (tests/test_cuda_gemm_fp8.c).
 *
 * Plans: like frt_cuda_gemm (gemm.cu), each (n, in, out, out dtype) is
 * planned once at setup and the run only calls cublasLtMatmul. Unlike it,
 * one algorithm is chosen per (in, out, out dtype): the heuristic's first
 * result for n = FRT_CUDA_GEMM_FP8_REF_N rows, reused for every n that
 * cublasLtMatmulAlgoCheck accepts, so a row's sums run in the same order
 * whatever the number of rows beside it (each output tile's k loop is the
 * algorithm's); an n the algorithm does not support gets the heuristic's
 * own choice and its plan says so (shape_algo 0).
 */
#ifndef FRT_KERNELS_CUDA_GEMM_FP8_H
#define FRT_KERNELS_CUDA_GEMM_FP8_H

#include "kernels/cuda/kernels_cuda.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FRT_CUDA_GEMM_FP8_REF_N 2048 /* the row count the shape's algorithm is chosen for */

typedef struct frt_cuda_gemm_fp8 frt_cuda_gemm_fp8;

/* Who applies the scales, for the plans made after
 * frt_cuda_gemm_fp8_set_scaling. */
typedef enum frt_cuda_gemm_fp8_scaling {
    FRT_CUDA_GEMM_FP8_SCALES_AUTO = 0,    /* cuBLASLt's outer vectors when it has an algorithm, else the epilogue */
    FRT_CUDA_GEMM_FP8_SCALES_LIBRARY = 1, /* cuBLASLt's outer vectors only (else FRT_ERR_UNSUPPORTED) */
    FRT_CUDA_GEMM_FP8_SCALES_EPILOGUE = 2, /* unit scales in cuBLASLt, f32 out, frt's epilogue kernel */
    FRT_CUDA_GEMM_FP8_SCALES_NONE = 3      /* unit scales, no epilogue: the accumulator (f32 or bf16 out) through
                                              frt_cuda_gemm_fp8_run_acc only, its consumer applies the scales */
} frt_cuda_gemm_fp8_scaling;

/* A plan's key and its algorithm (the ids of frt_cuda_gemm_plan_info). */
typedef struct frt_cuda_gemm_fp8_plan_info {
    int n, in_dim, out_dim;
    frt_cuda_dtype out_dtype;
    int algo_id, tile_id, stages_id, splitk_num, reduction_scheme, cta_swizzling, custom_option;
    int shape_algo; /* 1: the (in, out, dtype) algorithm of n = FRT_CUDA_GEMM_FP8_REF_N; 0: n's own */
    int scales_in_library; /* 1: cuBLASLt's OUTER_VEC_32F; 0: unit scales + frt's epilogue */
    int scales_none;       /* 1: FRT_CUDA_GEMM_FP8_SCALES_NONE (frt_cuda_gemm_fp8_run_acc only) */
    int like_n; /* frt_cuda_gemm_fp8_plan_like: the rows of the plan whose algorithm it runs (0: its own) */
} frt_cuda_gemm_fp8_plan_info;

/* Creates an FP8 GEMM handle on top of `base` (a frt_cuda_gemm): it uses
 * base's cuBLASLt handle and the workspace of each stream added to base
 * (frt_cuda_gemm_add_stream), so base must outlive it. Free with
 * frt_cuda_gemm_fp8_destroy. Errors: FRT_ERR_INVALID_ARGUMENT (NULL),
 * FRT_ERR_OUT_OF_MEMORY, FRT_ERR_BACKEND. On failure *out is NULL. */
int frt_cuda_gemm_fp8_create(frt_cuda_gemm *base, frt_cuda_gemm_fp8 **out);

/* Frees the handle and its plans (sync the streams first). NULL is a no-op. */
void frt_cuda_gemm_fp8_destroy(frt_cuda_gemm_fp8 *g);

/* Sets who applies the scales in the plans made after this call (the
 * default is FRT_CUDA_GEMM_FP8_SCALES_AUTO); plans already made keep
 * theirs. Errors: FRT_ERR_INVALID_ARGUMENT (NULL, a value outside the enum). */
int frt_cuda_gemm_fp8_set_scaling(frt_cuda_gemm_fp8 *g, frt_cuda_gemm_fp8_scaling scaling);

/* own 1: the plans made after this call take the heuristic's first choice
 * at their own n (shape_algo 0), as frt_cuda_gemm's plans do, instead of
 * the shape's REF_N algorithm; own 0 (the default) goes back to it. For
 * the small n of an append: the REF_N algorithm's 128 x 128 tiles give a
 * 64-row product out_dim / 128 blocks, most SMs idle. A row's sums then
 * depend on the plan's n, so a caller uses it only where every run of a
 * given row takes the same plan (the model's piece schedule: docs/fp8.md).
 * Plans already made keep theirs. Errors: FRT_ERR_INVALID_ARGUMENT (NULL,
 * own not 0 or 1). */
int frt_cuda_gemm_fp8_set_own_algo(frt_cuda_gemm_fp8 *g, int own);

/* Chooses and caches the algorithm of a shape (a no-op when cached); setup
 * time, never inside a capture. n >= 1; in_dim and out_dim positive
 * multiples of 16 (cuBLASLt FP8: 16-byte leading dimensions of the E4M3
 * operands); out_dtype FRT_CUDA_F32 or FRT_CUDA_BF16.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, shape, dtype); FRT_ERR_OUT_OF_RANGE
 * (more than 256 plans); FRT_ERR_UNSUPPORTED (cuBLASLt has no algorithm:
 * e.g. a GPU without FP8 tensor cores (before sm_89); or bf16 out where
 * the scales cannot be the library's); FRT_ERR_OUT_OF_MEMORY; FRT_ERR_BACKEND.
 * On failure the handle is unchanged. */
int frt_cuda_gemm_fp8_plan(frt_cuda_gemm_fp8 *g, int n, int in_dim, int out_dim, frt_cuda_dtype out_dtype);

/* y[t, o] = (sum_k decode(xq[t, k]) * decode(w[o, k])) * x_scale[t] *
 * w_scale[o] for t < n, o < out_dim:
 *   xq      [n, in_dim] E4M3 codes (the activations, per-token scaled);
 *   x_scale [n] f32;
 *   w       [out_dim, in_dim] E4M3 codes, row-major (the HF Linear layout);
 *   w_scale [out_dim] f32;
 *   y       [n, out_dim] f32 or bf16 (y_dtype; overwritten).
 * All device memory, 16-byte aligned. A "TN" cuBLASLt GEMM (A = w
 * transposed, as Hopper's FP8 kernels require), fp32 accumulation (the
 * default, not CUBLASLT_MATMUL_DESC_FAST_ACCUM), the scales applied by the
 * library or by frt's epilogue kernel (the plan's scales_in_library).
 * Deterministic for a plan. Sets the plan descriptor's
 * scale pointers, so two threads must not run the same handle at once. No
 * allocation: legal inside a stream capture (stream added to base).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, shape, dtype, alignment);
 * FRT_ERR_STATE (no plan, or the stream has no workspace that the plan
 * needs); FRT_ERR_BACKEND (cuBLASLt). Nothing is enqueued on an error. */
int frt_cuda_gemm_fp8_run(frt_cuda_gemm_fp8 *g, void *stream, void *y, frt_cuda_dtype y_dtype, const uint8_t *xq,
                          const float *x_scale, const uint8_t *w, const float *w_scale, int n, int in_dim,
                          int out_dim);

/* The GEMM of a plan with unit scales (scales_in_library 0: made under
 * FRT_CUDA_GEMM_FP8_SCALES_EPILOGUE, f32, or _NONE, f32 or bf16) without
 * an epilogue: acc[t, o] = sum_k decode(xq[t, k]) * decode(w[o, k]), the
 * unscaled fp32 accumulator stored as acc_dtype (bf16: rounded once, RNE),
 * for a consumer that applies (acc * x_scale[t]) * w_scale[o] itself as
 * it reads acc (frt_cuda_swiglu_fp8acc{,_quantize},
 * frt_cuda_add_rmsnorm_fp8acc: one pass over the output instead of two).
 * Operands as frt_cuda_gemm_fp8_run. A _NONE plan runs only here
 * (frt_cuda_gemm_fp8_run refuses it: FRT_ERR_STATE). Errors: those of
 * frt_cuda_gemm_fp8_run; FRT_ERR_STATE also when the plan has the library
 * apply the scales. */
int frt_cuda_gemm_fp8_run_acc(frt_cuda_gemm_fp8 *g, void *stream, void *acc, frt_cuda_dtype acc_dtype,
                              const uint8_t *xq, const uint8_t *w, int n, int in_dim, int out_dim);

/* The products of a prefill piece's SwiGLU MLP with unit-scale plans
 * (docs/fp8.md "The MLP's products in a prefill piece"): xq / xs [n, hidden]
 * the quantized input (frt_cuda_fp8_quantize_rows_dynamic); gate and up
 * through frt_cuda_gemm_fp8_run_acc into gate_acc / up_acc [n, inter]
 * bf16 (plans of FRT_CUDA_GEMM_FP8_SCALES_NONE, bf16 out),
 * frt_cuda_swiglu_fp8acc_quantize of them into xq / xs (down's input,
 * [n, inter] codes: xq must hold n * inter bytes), then down through
 * frt_cuda_gemm_fp8_run_acc into down_acc [n, hidden] f32 (an EPILOGUE or
 * NONE plan, f32 out): unscaled, for frt_cuda_add_rmsnorm_fp8acc with xs
 * and down's scales. Weights [out, in] E4M3 codes, their per-channel
 * scales [out]. Errors: those of the three calls (nothing after the
 * failing one is enqueued). */
int frt_cuda_gemm_fp8_mlp(frt_cuda_gemm_fp8 *g, void *stream, uint8_t *xq, float *xs, uint16_t *gate_acc,
                          uint16_t *up_acc, float *down_acc, const uint8_t *gate_w, const float *gate_s,
                          const uint8_t *up_w, const float *up_s, const uint8_t *down_w, int n, int hidden, int inter);

/* Prefill groups (docs/architectures.md "Prefill groups"; the bf16
 * handle's frt_cuda_gemm_plan_like / _check_like): a plan of n rows with the
 * algorithm and scaling of the existing plan of n_src rows (same in_dim,
 * out_dim, out_dtype), checked with cublasLtMatmulAlgoCheck; a no-op when
 * made already. Left out of frt_cuda_gemm_fp8_fingerprint once
 * frt_cuda_gemm_fp8_check_like shows it gives the n_src plan's bits.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, shape, n <= n_src); FRT_ERR_STATE
 * (no n_src plan, or an n plan of its own); FRT_ERR_UNSUPPORTED (the
 * algorithm does not take n rows); FRT_ERR_OUT_OF_RANGE; FRT_ERR_BACKEND. */
int frt_cuda_gemm_fp8_plan_like(frt_cuda_gemm_fp8 *g, int n, int n_src, int in_dim, int out_dim,
                                frt_cuda_dtype out_dtype);

/* Runs the n-row plan and, piece by piece, the n_src-row plan on the same
 * fixed pseudo-random operands (xq [n, in_dim] E4M3 codes with no NaN
 * code, x_scale [n] f32 2^-(t % 5), written here) and the weight w / w_scale
 * ([out_dim, in_dim] codes, [out_dim] f32), and compares y [n, out_dim]
 * with each piece's y_ref [n_src, out_dim] word for word: *same 1 when every
 * row matched. Device scratch xq, x_scale, y, y_ref of those sizes (y and
 * y_ref in out_dtype). Synchronizes the stream. Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL, n not a multiple of n_src); those of
 * frt_cuda_gemm_fp8_run; FRT_ERR_BACKEND. */
int frt_cuda_gemm_fp8_check_like(frt_cuda_gemm_fp8 *g, void *stream, int n, int n_src, int in_dim, int out_dim,
                                 frt_cuda_dtype out_dtype, const uint8_t *w, const float *w_scale, uint8_t *xq,
                                 float *x_scale, void *y, void *y_ref, int *same);

/* Plans made so far (0 for NULL), and plan i (in the order they were made)
 * into *info. Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_OUT_OF_RANGE. */
int frt_cuda_gemm_fp8_plan_count(const frt_cuda_gemm_fp8 *g);
int frt_cuda_gemm_fp8_plan_get(const frt_cuda_gemm_fp8 *g, int i, frt_cuda_gemm_fp8_plan_info *info);

/* A hash of every plan's key and algorithm ids (0 for NULL): another plan
 * is other arithmetic, so the model hashes it into its fingerprint. */
uint64_t frt_cuda_gemm_fp8_fingerprint(const frt_cuda_gemm_fp8 *g);

#ifdef __cplusplus
}
#endif

#endif /* FRT_KERNELS_CUDA_GEMM_FP8_H */
