/*
 * model/arch/group_cuda.h - prefill groups on the CUDA backends
 * (docs/architectures.md "Prefill groups"), shared by the dense and the
 * hybrid architectures: a group replay runs j = 2, 4, .. m->G whole prefill
 * pieces of C rows, every product once over the j * C rows, each row with
 * the bits of its own piece.
 *
 *   - frt_group_check: at load, the group plans of every prefill product
 *     (frt_cuda_gemm_plan_like, frt_cuda_gemm_fp8_plan_like) checked on the
 *     device to give each row its piece's bytes; the G that passed.
 *   - frt_group_pos: inside a group replay, the device table of the
 *     pieces' starts the attention reads.
 *   - frt_group_attention: a group's attention, several pieces a launch with
 *     a piece's key splits (frt_cuda_attention_prefill_pieces{,_fp8}).
 */
#ifndef FRT_MODEL_ARCH_GROUP_CUDA_H
#define FRT_MODEL_ARCH_GROUP_CUDA_H

#include "kernels/cuda/gemm_fp8.h"
#include "kernels/cuda/kernels_cuda.h"
#include "frt/model.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of split partials a group replay's attention launch may take
 * (frt_group_attn_pieces). */
#define FRT_GROUP_ATTN_WS ((size_t)256 << 20)

/* One prefill product y [rows, out] = x [rows, in] . W^T as the forward pass
 * runs it over a piece: bf16 weights w [out, in] (device) through the
 * cuBLASLt plan with output dtype y_dtype, or with FP8 weights (w NULL)
 * E4M3 codes q [out, in] and per-row f32 scales s [out] (device) through
 * the FP8 GEMM (output y_dtype: f32, or bf16 for an accumulator plan,
 * FRT_CUDA_GEMM_FP8_SCALES_NONE). The weights are the check's data only
 * (layer 0's of the kind, say); the plan is the shape's. */
typedef struct frt_group_product {
    int in, out;
    frt_cuda_dtype y_dtype;
    const uint16_t *w;
    const uint8_t *q;
    const float *s;
    int acc; /* bf16 weights: the accumulating plan (y += x . w^T), as the prefill runs it */
} frt_group_product;

/* frt_arch_backend.prefill_group's ladder: G up to want (0: up to 8 pieces
 * and 2048 rows, i.e. 8 at C = 256 and 1 from C = 2048; at most
 * m->G, the runtime's cap); for each group size j = 2, 4, .. G, every
 * product of p[0 .. n-1] gets its j * C-row group plan, checked on the
 * device over a fixed pseudo-random input to give each row the bytes of
 * the C-row plan (bf16: the heuristic's first choices for j * C rows, then
 * the C-row algorithm, the first that passes kept; FP8: the C-row plan's
 * algorithm). The C-row plans must exist (gemm for bf16, gemm8 for FP8:
 * gemm8 non-NULL selects FP8). Products of one shape are checked once. A
 * size where a product fails ends the ladder: *got is the last size that
 * passed (1: none). who names the backend in messages. Temporary device
 * buffers of about G C (in + 4 out) bytes are freed before it returns.
 * Errors: FRT_ERR_UNSUPPORTED when want > 1 and a size up to want fails
 * (the message names the product); FRT_ERR_OUT_OF_MEMORY (the check's
 * buffers); FRT_ERR_INVALID_ARGUMENT (NULL, n outside 1..32); the plans'
 * and the checks' errors. */
int frt_group_check(frt_model *m, const char *who, frt_cuda_gemm *gemm, frt_cuda_gemm_fp8 *gemm8,
                    const frt_group_product *p, int n, int want, int *got);

/* The refusal of a backend that runs one piece a replay for a reason (why,
 * e.g. "debug_hidden records one piece a replay"): *got = 1; want > 1 is
 * FRT_ERR_UNSUPPORTED with who and why in the message, else 0. */
int frt_group_refuse(const char *who, const char *why, int want, int *got);

/* frt_model_params.gemm_autotune on an LLM backend (docs/kernels-cuda.md
 * "GEMM autotune"): the cuBLASLt plans made so far, the prefill buckets
 * below the piece size C (appends: their rows never join a group), timed
 * (frt_cuda_gemm_autotune) or loaded from params.gemm_tune_file
 * (frt_cuda_gemm_autotune_file). Called once, after those plans and
 * before the C-row plans: a group's plan runs the C-row plan's algorithm,
 * checked at load, so the C-row plans keep the heuristic's first choice.
 * gemm_autotune 0 does nothing. Errors: those of the two calls. */
int frt_gemm_tune_appends(frt_model *m, frt_cuda_gemm *gemm);

/* Which prefill products of an append bucket (fewer rows than C) an LLM
 * backend puts on the skinny GEMM (frt_cuda_gemm_set_skinny;
 * docs/kernels-cuda.md "The skinny GEMM"): FRT_GEMM_SKINNY=0 in the
 * environment none, 1 gate / up with the SwiGLU in one launch
 * (frt_cuda_gemm_swiglu; the default), 2 every product. 0 under
 * params.gemm_autotune, which times cuBLASLt's algorithms for these plans.
 * The C-row plans stay on cuBLASLt (prefill groups run their algorithm). */
int frt_gemm_skinny_mode(const frt_model *m);

/* A prefill group's piece table: pos[p] = *d_start + p * C for p < pieces,
 * then pos[pieces] = C and pos[pieces + 1] = min(run, pieces) * C, the row
 * counts the attention launches of one piece and of `run` pieces read
 * (run: frt_group_attn_pieces). pos [pieces + 2] int32 (device); d_start
 * [1] int32 (device). Enqueues only (legal inside a capture). Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL, pieces < 1 or >= 1022, C < 1, run < 1);
 * FRT_ERR_BACKEND. */
int frt_group_pos(void *stream, int32_t *pos, const int32_t *d_start, int pieces, int C, int run);

/* A replay of `rows` rows: the whole pieces of C rows a group runs
 * (rows = pieces * C, rows > C), 1 for a bucket of up to C rows and for
 * decode. */
int frt_group_pieces(const frt_model *m, int rows, int decode);

/* record_prefill's bucket: 1..C, or j * C for a group of j = 2, 4, .. G
 * pieces; else FRT_ERR_INVALID_ARGUMENT naming who. */
int frt_group_bucket_check(const frt_model *m, int bucket, const char *who);

/* Pieces a group replay's attention launch takes for groups of up to G
 * pieces of C rows: the most (a power of two up to G) whose split partials
 * fit the larger of FRT_GROUP_ATTN_WS and *ws_bytes (the C-row launch's
 * workspace), 1 where even two do not. *ws_bytes grows to that launch's
 * workspace (frt_cuda_attention_prefill_pieces_workspace_bytes). G <= 1:
 * 1, *ws_bytes unchanged. */
int frt_group_attn_pieces(int G, int C, int max_seq, int n_heads, int head_dim, size_t *ws_bytes);

/* A prefill replay's attention over one layer's cache: one piece (pieces
 * 1: rows rows from *d_start, *d_n of them valid) or a group's pieces. */
typedef struct frt_group_attn {
    void *stream;
    void *out;                      /* [rows, n_heads * head_dim] of out_dtype */
    frt_cuda_dtype out_dtype;
    const void *q;                  /* [rows, n_heads * head_dim] of q_dtype (roped) */
    frt_cuda_dtype q_dtype;         /* f32, or bf16 (the FlashAttention kernels round an f32 q to it: the same bits) */
    const void *k_cache, *v_cache;  /* [max_seq, n_kv_heads, head_dim]: bf16, or E4M3 codes with scales */
    const float *k_scale, *v_scale; /* the FP8 KV cache's per-head scales [n_kv_heads] f32; NULL: bf16 */
    const int32_t *d_start, *d_n;   /* pieces 1: the piece's start and valid rows [1] int32 (device) */
    int rows;                       /* pieces 1: the bucket; else pieces * C */
    const int32_t *gpos;            /* pieces > 1: frt_group_pos's table of this replay */
    int pieces, run, C;             /* pieces of C rows; run: pieces a launch (frt_group_attn_pieces) */
    int max_seq, n_heads, n_kv_heads, head_dim;
    float scale;                    /* the softmax scale */
    void *ws;                       /* split partials (device), ws_bytes */
    size_t ws_bytes;
    const void *kv_src;             /* pieces 1, a bf16 cache: a restore source (frt_cuda_attention_prefill_src,
                                       which must take the launch), or NULL */
} frt_group_attn;

/* A prefill replay's attention (causal, from each row's position): one
 * piece through frt_cuda_attention_prefill{,_fp8}; a group's pieces `run`
 * a launch of frt_cuda_attention_prefill_pieces{,_fp8} (the key splits of a
 * C-row launch), so every row gets the bits of its piece's launch alone at
 * that piece's start. Where the FlashAttention kernel does not take the
 * head size (FRT_ERR_UNSUPPORTED), the CUDA-core kernel (frt_cuda_attention
 * {,_fp8}, no splits), one piece a launch. Enqueues only. Errors: the
 * kernels'. */
int frt_group_attention(const frt_group_attn *a);

#ifdef __cplusplus
}
#endif
#endif /* FRT_MODEL_ARCH_GROUP_CUDA_H */
