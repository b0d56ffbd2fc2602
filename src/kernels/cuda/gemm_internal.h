/*
 * kernels/cuda/gemm_internal.h - the GEMM handle's internals, shared by
 * gemm.cu (plans, runs) and gemm_autotune.cu (autotune, save, load).
 * Internal; CUDA C++ only.
 */
#ifndef FRT_KERNELS_CUDA_GEMM_INTERNAL_H
#define FRT_KERNELS_CUDA_GEMM_INTERNAL_H

#include "kernels/cuda/gemv_util.h"
#include "kernels/gemm_tune.h"

#define GEMM_MAX_STREAMS 16
#define GEMM_MAX_PLANS 1024
#define GEMM_SKINNY_VERSION 2 /* plan_info.custom_option of a skinny plan */

/* The skinny GEMM's launch (gemm_skinny.cu): tiles of 256 output columns,
 * kb units of 64 inner elements, each tile's units cut into `splits`
 * ranges, one block each, the blocks of a tile one cluster. A function of
 * (n, in, out) and the device (its SM count and cluster occupancy) only. */
typedef struct skinny_cfg {
    int on, tiles, kb, splits;
} skinny_cfg;

/* The skinny plan of a shape into *c (c->on 0 where it does not apply:
 * n outside FRT_CUDA_GEMV_MAX_N + 1 .. 64, out_dim or in_dim not a multiple
 * of 8, not a Hopper device); glu: the SwiGLU form's (tiles of 128 gate and
 * 128 up columns). Sets the kernels' shared-memory attribute (at setup).
 * Errors: FRT_ERR_BACKEND. */
int gemm_skinny_choose(int n, int in_dim, int out_dim, int glu, skinny_cfg *c);

/* Enqueues the skinny GEMM of plan c (a programmatic dependent launch in
 * clusters). Errors: FRT_ERR_UNSUPPORTED, FRT_ERR_BACKEND (the tensor
 * maps); FRT_ERR_BACKEND (the launch). */
int gemm_skinny_run(const skinny_cfg *c, void *stream, void *y, int y_bf16, const uint16_t *x, const uint16_t *w, int n,
                    int in_dim, int out_dim, int accumulate);

/* The SwiGLU form (frt_cuda_gemm_swiglu) of glu plan c; round: the
 * products rounded to bf16 first. Errors: those of gemm_skinny_run. */
int gemm_skinny_glu_run(const skinny_cfg *c, void *stream, uint16_t *y, const uint16_t *x, const uint16_t *wg,
                        const uint16_t *wu, int n, int in_dim, int out_dim, int round);

struct gemm_plan {
    int n, in_dim, out_dim, out_dt, accumulate;
    int epi; /* frt_cuda_gemm_epilogue (bf16 out, no accumulate, cuBLASLt only) */
    frt_cuda_gemm_kernel kernel;
    gemv_cfg gv; /* FRT_CUDA_GEMM_GEMV */
    skinny_cfg sk;  /* FRT_CUDA_GEMM_SKINNY */
    skinny_cfg skg; /* a skinny plan that does not accumulate: its SwiGLU form */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
    size_t ws_needed;
    int like_n;   /* frt_cuda_gemm_plan_like: the rows of the plan whose algorithm this one runs; 0: its own */
    int tune_index, tune_candidates; /* frt_cuda_gemm_plan_info */
    float tune_us_first, tune_us_best;
};

struct frt_cuda_gemm {
    cublasLtHandle_t lt;
    frt_cuda_gemv_policy gemv_policy;
    int skinny; /* frt_cuda_gemm_set_skinny */
    size_t ws_bytes;
    int n_streams;
    void *streams[GEMM_MAX_STREAMS];
    void *ws[GEMM_MAX_STREAMS];
    int n_plans, cap_plans;
    gemm_plan *plans;
    int tune_n; /* N of the last frt_cuda_gemm_autotune, or the candidates of a loaded file */
};

/* The plan of a shape without an epilogue, or NULL. */
gemm_plan *gemm_plan_find(const frt_cuda_gemm *g, int n, int in_dim, int out_dim, int out_dt, int accumulate);

/* The heuristic's first `want` (1..FRT_GEMM_TUNE_MAX_CANDIDATES) results
 * for p's descriptors (16-byte aligned operands, the handle's workspace),
 * ranked; *found of them. FRT_ERR_UNSUPPORTED when there is none. */
int gemm_heuristic(const frt_cuda_gemm *g, const gemm_plan *p, int want, cublasLtMatmulHeuristicResult_t *res,
                   int *found);

/* The row check of frt_cuda_gemm_check_like and its FP8 twin: for j <
 * pieces, run_piece(j, user) writes piece j's rows into y_ref (piece_bytes,
 * a multiple of 4), compared word for word on the device with bytes j *
 * piece_bytes.. of y. *same 1 when every word matched. Synchronizes st.
 * Errors: run_piece's; FRT_ERR_OUT_OF_MEMORY; FRT_ERR_BACKEND. */
int gemm_compare_pieces(cudaStream_t st, const void *y, void *y_ref, size_t piece_bytes, int pieces,
                        int (*run_piece)(int j, void *user), void *user, int *same);

/* The workspace of an added stream; 1 when added (else *ws NULL, *bytes 0). */
int gemm_stream_ws(const frt_cuda_gemm *g, void *stream, void **ws, size_t *bytes);

/* The config ids of an algorithm in frt_gemm_tune_entry.algo's order: id,
 * tile, stages, split-k, reduction, swizzle, custom option. */
void gemm_algo_ids(const cublasLtMatmulAlgo_t *a, int ids[7]);

#endif /* FRT_KERNELS_CUDA_GEMM_INTERNAL_H */
