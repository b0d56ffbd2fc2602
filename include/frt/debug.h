/*
 * frt/debug.h - hooks for tests, benchmarks and tools that look inside the
 * runtime. Not needed to run a model; kept stable within a release, but
 * they may change with the runtime (they name its mechanisms, not a
 * contract).
 */
#ifndef FRT_DEBUG_H
#define FRT_DEBUG_H

#include "frt/capsule.h"
#include "frt/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* frt_capsule_restore_ex flags. */
enum {
    /* Ablation (the exactness suite): restore every buffer except the
     * recurrent entries of the state table (frt_state_info.recurrent: the
     * Gated DeltaNet state and conv window), which are zeroed... */
    FRT_RESTORE_KV_ONLY_ZERO = 1 << 0,
    /* ...or left as the live state had them (stale). */
    FRT_RESTORE_KV_ONLY_STALE = 1 << 1,
    /* Copy every buffer even when a rollback restore would do (the
     * benchmark's full-restore figure; tests comparing both forms). */
    FRT_RESTORE_FULL = 1 << 2,
};

/* frt_capsule_restore with flags (0 = frt_capsule_restore). Errors as
 * frt_capsule_restore; on error the live state is untouched. */
FRT_API int frt_capsule_restore_ex(frt_model *m, const frt_capsule *c, int flags);

/* frt_capsule_restore_prefill with flags (0 or FRT_RESTORE_FULL: the whole
 * restore even where a rollback would do). Errors as
 * frt_capsule_restore_prefill; FRT_ERR_INVALID_ARGUMENT for other flags. */
FRT_API int frt_capsule_restore_prefill_ex(frt_model *m, const frt_capsule *c, int flags, const int32_t *ids, int n);

/* A checkpoint held in memory (the weights layer's frt_checkpoint) and a
 * parsed config.json (frt_model_config): opaque here. */
typedef struct frt_checkpoint frt_checkpoint;
typedef struct frt_model_config frt_model_config;

/* The end-of-sequence ids and sampling defaults of generation_config.json. */
typedef struct frt_generation_config frt_generation_config;

/* Loads a model from a checkpoint already in memory (a random-weight
 * checkpoint built for a benchmark that cannot afford the disk). ck is
 * borrowed: it must stay open until frt_model_free, and may serve several
 * models. gen NULL: no end-of-sequence ids beyond cfg's eos_token_id,
 * default sampling. No tokenizer. Errors as frt_model_load. */
FRT_API int frt_model_load_checkpoint(frt_checkpoint *ck, const frt_model_config *cfg, const frt_generation_config *gen,
                              const frt_model_params *params, frt_model **out);

/* Test hook (params.debug_hidden): hidden state idx (0 = embeddings,
 * i = after layer i-1, n_layers + 1 = after the final norm) of the last
 * prefill piece, rows [0, n), [n, hidden] f32 into out.
 *   FRT_ERR_UNSUPPORTED   the backend records no hidden states
 *   FRT_ERR_STATE         params.debug_hidden was 0 at load
 *   FRT_ERR_OUT_OF_RANGE  idx or n outside the last piece */
FRT_API int frt_model_debug_hidden(frt_model *m, int idx, float *out, int n);

/* x[i] = a * x[i] + b for the n floats at the start of buffer x, enqueued
 * on s: one small kernel on a cuda device buffer, a host task otherwise.
 * What the launch-overhead measurements (frt bench exec, frt selfcheck)
 * chain. FRT_ERR_INVALID_ARGUMENT: NULL, or n floats beyond the buffer. */
FRT_API int frt_debug_axpb(frt_stream *s, frt_buffer *x, size_t n, float a, float b);

/* Times a bf16 GEMM of n x n x n on the cuda backend of ctx through the
 * runtime's cuBLASLt plans (fp32 accumulation, the algorithm the model
 * layer would pick), 3 warm-up runs then reps timed with events: the median
 * in *ms. The benchmark's GEMM ceiling.
 *   FRT_ERR_UNSUPPORTED       a cpu context, or a build without CUDA
 *   FRT_ERR_INVALID_ARGUMENT  NULL, n < 64 or not a multiple of 16, reps < 1 or > 64
 *   FRT_ERR_OUT_OF_MEMORY, FRT_ERR_BACKEND */
FRT_API int frt_debug_gemm_ms(frt_context *ctx, int n, int reps, double *ms);

/* The same for the FP8 prefill GEMM (docs/fp8.md): E4M3 x and w quantized
 * per row from the same random bf16 values (not timed), n x n x n through
 * frt_cuda_gemm_fp8 (cuBLASLt, outer-vector scales, fp32 accumulation,
 * bf16 out); the benchmark's FP8 GEMM ceiling. Errors: as above, and
 * FRT_ERR_UNSUPPORTED when cuBLASLt has no FP8 algorithm (a GPU before
 * sm_89, a cuBLAS without outer-vector scales). */
FRT_API int frt_debug_gemm_fp8_ms(frt_context *ctx, int n, int reps, double *ms);

#ifdef __cplusplus
}
#endif
#endif /* FRT_DEBUG_H */
