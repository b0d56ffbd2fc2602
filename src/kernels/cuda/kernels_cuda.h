/*
 * kernels/cuda/kernels_cuda.h - the CUDA kernels of frt, callable from C.
 * One op per file in src/kernels/cuda/; each computes the same function as
 * its CPU twin in kernels/cpu/kernels_cpu.h (named on each declaration) and
 * is tested against it in tests/test_cuda_kernels.c. docs/kernels-cuda.md
 * lists every kernel, what it reads from device memory and its tolerance.
 *
 * Conventions (every launcher below):
 *   - `stream` is a cudaStream_t passed as void * (frt_stream_native), so C
 *     callers need no CUDA headers. Every pointer named d_* or documented as
 *     "device" is device memory. Launchers only enqueue: they return at once,
 *     never synchronize, and are legal inside a stream capture
 *     (frt_graph_capture).
 *   - Returns 0, FRT_ERR_INVALID_ARGUMENT (bad pointer, size or dtype:
 *     nothing is enqueued), FRT_ERR_UNSUPPORTED (a size this kernel has no
 *     variant for), or FRT_ERR_BACKEND (the launch failed:
 *     cudaGetLastError after each launch), with a message for
 *     frt_last_error().
 *   - Dynamic values. Everything that changes between decode steps or
 *     prefill chunks is READ FROM DEVICE MEMORY inside the kernel, never
 *     passed as a launch argument, so a captured CUDA graph replays at any
 *     position:
 *       d_n      int32, the valid token count; NULL means max_n. Clamped to
 *                [0, max_n]. Rows t >= n are neither read nor written.
 *       d_start  int32, the absolute position of token 0 (RoPE, KV append,
 *                attention). Required where taken; negative reads as 0.
 *     Launch grids are sized for max_n (the bucket length) or max_seq and the
 *     threads past the dynamic bound exit early.
 *   - Layouts are row-major and contiguous, as on the CPU: activations
 *     [n_tok, ...]. Storage dtypes: weights bf16 (raw uint16 bits, RNE
 *     rounded as util/bf16.h), activations f32 or bf16 (frt_cuda_dtype
 *     arguments), the KV cache bf16, the recurrent and conv state f32, small
 *     per-channel weights (norm weights, conv weights, A_log, dt_bias) f32
 *     (the loader widens bf16 to f32, exactly). Arithmetic is fp32 (fp64
 *     where the CPU twin uses fp64: norm sums, the gated delta rule's
 *     cumulative decay, sampling probabilities).
 *   - Deterministic: no atomics; every reduction runs in a fixed order that
 *     depends on the launch configuration only, so the same inputs give the
 *     same bits on every run.
 *   - Outputs never alias inputs unless a function says so.
 */
#ifndef FRT_KERNELS_CUDA_H
#define FRT_KERNELS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element type of an activation buffer. */
typedef enum frt_cuda_dtype {
    FRT_CUDA_F32 = 0,  /* float */
    FRT_CUDA_BF16 = 1, /* bfloat16 (uint16 bits); stores round to nearest even */
} frt_cuda_dtype;

/* ---- embedding ---------------------------------------------------------- */

/* out[t, :] = table[ids[t], :] for t < n.
 * table [vocab, dim] bf16; d_ids [max_n] int32 (device); out [max_n, dim] of
 * out_dtype (bf16: the table bits copied; f32: widened exactly). An id
 * outside [0, vocab) gives a row of zeros (never an out-of-bounds read).
 * Twin: frt_cpu_embedding_bf16. */
int frt_cuda_embedding(void *stream, void *out, frt_cuda_dtype out_dtype, const uint16_t *table,
                       int vocab, int dim, const int32_t *d_ids, const int32_t *d_n, int max_n);

/* ---- normalisation ------------------------------------------------------ */

/* RMSNorm over the last dim of x [max_n, n_heads, dim] (n_heads 1 for the
 * layer norms, n_heads for q_norm / k_norm):
 *   out = x * rsqrt(mean(x^2) + eps) * (zero_centered ? 1 + w : w)
 * w [dim] f32. out [max_n, n_heads, dim] of out_dtype; out may equal x when
 * the dtypes are equal (in place). The sum of squares is accumulated in fp64.
 * Twin: frt_cpu_rmsnorm. */
int frt_cuda_rmsnorm(void *stream, void *out, frt_cuda_dtype out_dtype, const void *x,
                     frt_cuda_dtype x_dtype, const float *w, const int32_t *d_n, int max_n,
                     int n_heads, int dim, float eps, int zero_centered);

/* The residual add fused with the next norm:
 *   resid[t, :] += delta[t, :];  out[t, :] = rmsnorm(resid[t, :])
 * resid [max_n, dim] f32 (read and updated); delta [max_n, dim] of
 * delta_dtype; out [max_n, dim] of out_dtype (must not alias resid or delta).
 * Twin: frt_cpu_add(resid, delta) then frt_cpu_rmsnorm. */
int frt_cuda_add_rmsnorm(void *stream, float *resid, const void *delta,
                         frt_cuda_dtype delta_dtype, void *out, frt_cuda_dtype out_dtype,
                         const float *w, const int32_t *d_n, int max_n, int dim, float eps,
                         int zero_centered);

/* Gated RMSNorm (the Gated DeltaNet output norm), rows of [max_n, n_heads, dim]:
 *   out = (w * (x * rsqrt(mean(x^2) + eps))) * silu(z)
 * x of x_dtype, z of z_dtype, out of out_dtype, all [max_n, n_heads, dim];
 * w [dim] f32 (plain weight). out may equal x or z when the dtypes match.
 * Twin: frt_cpu_rmsnorm_gated. */
int frt_cuda_rmsnorm_gated(void *stream, void *out, frt_cuda_dtype out_dtype, const void *x,
                           frt_cuda_dtype x_dtype, const void *z, frt_cuda_dtype z_dtype,
                           const float *w, const int32_t *d_n, int max_n, int n_heads, int dim,
                           float eps);

/* L2 normalisation in place of rows of x [max_n, n_heads, dim] (x_dtype):
 *   x = x * rsqrt(sum(x^2) + eps)      (sum in fp64)
 * Twin: frt_cpu_l2norm. */
int frt_cuda_l2norm(void *stream, void *x, frt_cuda_dtype x_dtype, const int32_t *d_n, int max_n,
                    int n_heads, int dim, float eps);

/* ---- positions ---------------------------------------------------------- */

/* Largest rot_dim frt_cuda_rope takes. */
#define FRT_CUDA_ROPE_MAX_ROT 512

/* Partial rotary embedding, rotate-half form, in place on the first rot_dim
 * dims of each head of x [max_n, n_heads, head_dim] (x_dtype); token t is at
 * position *d_start + t. inv_freq[i] = 1 / powf(theta, 2i / rot_dim) is
 * computed on the host with the CPU twin's very expression (so the angles
 * are bit-identical to it); cos/sin are CUDA's accurate cosf/sinf.
 * rot_dim even, 2 <= rot_dim <= min(head_dim, FRT_CUDA_ROPE_MAX_ROT).
 * Twin: frt_cpu_rope with pos[t] = start + t. */
int frt_cuda_rope(void *stream, void *x, frt_cuda_dtype x_dtype, const int32_t *d_start,
                  const int32_t *d_n, int max_n, int n_heads, int head_dim, int rot_dim,
                  float theta);

/* ---- KV cache and full attention --------------------------------------- */

/* Writes this block's K and V rows into the cache:
 *   k_cache[start + t] = bf16(k[t]), v_cache[start + t] = bf16(v[t]), t < n
 * k, v [max_n, n_kv_heads, head_dim] of src_dtype; k_cache, v_cache
 * [max_seq, n_kv_heads, head_dim] bf16. Rows start + t >= max_seq are
 * dropped (never written out of bounds). No CPU twin (a row copy); the
 * test checks the bits. */
int frt_cuda_kv_append(void *stream, uint16_t *k_cache, uint16_t *v_cache, const void *k,
                       const void *v, frt_cuda_dtype src_dtype, const int32_t *d_start,
                       const int32_t *d_n, int max_n, int max_seq, int n_kv_heads, int head_dim);

/* Causal GQA attention of the query block at positions start .. start+n-1
 * over the bf16 KV cache (which must already hold this block's rows):
 * query token t, head h reads KV head h / (n_heads / n_kv_heads) and cache
 * rows 0 .. min(start + t, max_seq - 1):
 *   out = softmax(scale * q . K^T) V     (online softmax, fp32)
 * q [max_n, n_heads, head_dim] of q_dtype; out [max_n, n_heads, head_dim] of
 * out_dtype; k_cache, v_cache [max_seq, n_kv_heads, head_dim] bf16.
 * head_dim a multiple of 32, at most 256; n_heads a multiple of n_kv_heads.
 *   split_len == 0: prefill form, one pass over the keys per query
 *     (workspace unused, may be NULL).
 *   split_len > 0: flash-decoding: the keys are cut into splits of split_len
 *     rows, one block per (split, query group) writes a partial (max, sum,
 *     unnormalised output) to workspace, and a combine kernel merges the
 *     splits of each query in ascending order. Decode is max_n = 1 with a
 *     split_len such as 256; the same call serves a prefill over a long
 *     cache. workspace (device) must hold
 *     frt_cuda_attention_workspace_bytes(...) bytes.
 * Twin: frt_cpu_attention (start_pos = start) on the widened cache. */
int frt_cuda_attention(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q,
                       frt_cuda_dtype q_dtype, const uint16_t *k_cache, const uint16_t *v_cache,
                       const int32_t *d_start, const int32_t *d_n, int max_n, int max_seq,
                       int n_heads, int n_kv_heads, int head_dim, float scale, int split_len,
                       void *workspace, size_t workspace_bytes);

/* Bytes of workspace frt_cuda_attention needs for these sizes (0 when
 * split_len == 0, or for invalid sizes). */
size_t frt_cuda_attention_workspace_bytes(int max_n, int max_seq, int n_heads, int head_dim,
                                          int split_len);

/* ---- Gated DeltaNet ----------------------------------------------------- */

/* Depthwise causal conv1d (no bias) + SiLU with a carried state:
 *   out[t, c] = silu(sum_{j < kernel} w[c, j] * xpad[t + j, c]),  xpad = [state, x]
 * then conv_state = the last kernel - 1 rows of [state, x[0..n-1]] (only the
 * valid rows count). x [max_n, channels] of x_dtype; out [max_n, channels] of
 * out_dtype (must not alias x); w [channels, kernel] f32; conv_state
 * [channels, kernel - 1] f32 (may be NULL only for kernel 1). Two launches
 * (outputs, then the state update). Twin: frt_cpu_conv1d_causal. */
int frt_cuda_conv1d_causal(void *stream, void *out, frt_cuda_dtype out_dtype, const void *x,
                           frt_cuda_dtype x_dtype, float *conv_state, const float *w,
                           const int32_t *d_n, int max_n, int channels, int kernel);

/* The Gated DeltaNet gates:
 *   g = -exp(A_log[h]) * softplus(a + dt_bias[h]),  beta = sigmoid(b)
 * a, b [max_n, n_heads] of ab_dtype; g, beta [max_n, n_heads] f32;
 * A_log, dt_bias [n_heads] f32. Twin: frt_cpu_gdn_gate. */
int frt_cuda_gdn_gate(void *stream, float *g, float *beta, const void *a, const void *b,
                      frt_cuda_dtype ab_dtype, const float *A_log, const float *dt_bias,
                      const int32_t *d_n, int max_n, int n_heads);

/* The gated delta rule, token by token (decode; any n):
 * state [n_v_heads, dk, dv] f32 (device, read and updated in place);
 * q, k [max_n, n_k_heads, dk] and v [max_n, n_v_heads, dv] of in_dtype, q and
 * k already L2-normalised (frt_cuda_l2norm); the kernel scales q by
 * dk^-0.5 itself; g, beta [max_n, n_v_heads] f32; out [max_n, n_v_heads, dv]
 * of out_dtype. Per token and value head, S = state[h]:
 *   S *= exp(g); kv = S^T k; delta = (v - kv) beta; S += k (x) delta; o = S^T q dk^-0.5
 * One warp per (value head, 32 columns of dv), sums over dk in ascending
 * order as the CPU twin. 1 <= dk <= 256; n_v_heads a multiple of n_k_heads.
 * Twin: frt_cpu_gdr_recurrent. */
int frt_cuda_gdr_recurrent(void *stream, void *out, frt_cuda_dtype out_dtype, float *state,
                           const void *q, const void *k, const void *v, frt_cuda_dtype in_dtype,
                           const float *g, const float *beta, const int32_t *d_n, int max_n,
                           int n_k_heads, int n_v_heads, int dk, int dv);

/* Largest chunk frt_cuda_gdr_chunked takes. */
#define FRT_CUDA_GDR_MAX_CHUNK 64

/* The gated delta rule, chunked (prefill): the arguments and result of
 * frt_cuda_gdr_recurrent, computed chunk by chunk of `chunk` tokens from
 * token 0 of the call with the CPU twin's UT/WY algorithm (fp64 in-chunk
 * cumulative decay, forward substitution, inter-chunk state scan) and the
 * same operation order per element. One block per (value head, 32 columns
 * of dv) walks the chunks in order, all in shared memory (~154 KiB for
 * dk 128, chunk 64). Splitting a prefill into calls at multiples of `chunk`
 * gives the same bits as one call. 1 <= chunk <= FRT_CUDA_GDR_MAX_CHUNK;
 * dk up to 128 at chunk 64 on an H100/H200 (227 KiB of shared memory per
 * block); a size whose shared memory does not fit the device is
 * FRT_ERR_UNSUPPORTED (checked before anything is enqueued: needs a current
 * device). Twin: frt_cpu_gdr_chunked. */
int frt_cuda_gdr_chunked(void *stream, void *out, frt_cuda_dtype out_dtype, float *state,
                         const void *q, const void *k, const void *v, frt_cuda_dtype in_dtype,
                         const float *g, const float *beta, const int32_t *d_n, int max_n,
                         int n_k_heads, int n_v_heads, int dk, int dv, int chunk);

/* ---- elementwise -------------------------------------------------------- */
/* The flat elementwise kernels work on the first n * per_tok elements of
 * buffers of max_n * per_tok elements (n from d_n). */

/* out = silu(gate) * up. gate, up of in_dtype; out of out_dtype (may equal
 * gate or up when the dtypes match). Twin: frt_cpu_swiglu. */
int frt_cuda_swiglu(void *stream, void *out, frt_cuda_dtype out_dtype, const void *gate,
                    const void *up, frt_cuda_dtype in_dtype, const int32_t *d_n, int max_n,
                    int per_tok);

/* y *= sigmoid(gate). Twin: frt_cpu_sigmoid_mul. */
int frt_cuda_sigmoid_mul(void *stream, void *y, frt_cuda_dtype y_dtype, const void *gate,
                         frt_cuda_dtype gate_dtype, const int32_t *d_n, int max_n, int per_tok);

/* y += x (the residual add). Twin: frt_cpu_add. */
int frt_cuda_add(void *stream, void *y, frt_cuda_dtype y_dtype, const void *x,
                 frt_cuda_dtype x_dtype, const int32_t *d_n, int max_n, int per_tok);

/* dst = src converted (f32 -> bf16 rounds to nearest even as
 * frt_f32_to_bf16; bf16 -> f32 is exact; same dtype copies). */
int frt_cuda_convert(void *stream, void *dst, frt_cuda_dtype dst_dtype, const void *src,
                     frt_cuda_dtype src_dtype, const int32_t *d_n, int max_n, int per_tok);

/* Column block of strided rows, converting the dtype:
 *   dst[r, c] = src[r * src_stride + c],  r < n * rows_per_tok, c < cols
 * dst [max_n * rows_per_tok, cols] contiguous; src_stride >= cols (elements).
 * Splits fused projections (q | gate per head, q | k | v of the conv).
 * Twin: frt_cpu_copy_rows. */
int frt_cuda_copy_rows(void *stream, void *dst, frt_cuda_dtype dst_dtype, const void *src,
                       frt_cuda_dtype src_dtype, const int32_t *d_n, int max_n, int rows_per_tok,
                       int cols, int src_stride);

/* dst[0, :] = src[n - 1, :] (the last valid token's row; n = *d_n clamped to
 * [1, max_n], so n = 0 reads row 0). src [max_n, width] of src_dtype, dst
 * [width] of dst_dtype. Picks the row that goes to the LM head after a
 * prefill chunk. */
int frt_cuda_last_row(void *stream, void *dst, frt_cuda_dtype dst_dtype, const void *src,
                      frt_cuda_dtype src_dtype, const int32_t *d_n, int max_n, int width);

/* ---- sampling ----------------------------------------------------------- */

/* Bytes of workspace frt_cuda_argmax needs for n logits. */
size_t frt_cuda_argmax_workspace_bytes(int n);

/* *d_token = index of the largest of logits [n] f32 (device): the lowest
 * index on ties, NaN skipped, 0 when all are NaN. Two launches: per-block
 * partial winners, then one block over the partials; the winner under the
 * total order (value desc, index asc) is unique, so the result does not
 * depend on the reduction order. 1 <= n <= 2^30.
 * Twin: frt_cpu_argmax. */
int frt_cuda_argmax(void *stream, int32_t *d_token, const float *logits, int n, void *workspace,
                    size_t workspace_bytes);

/* The sampling parameters, in device memory (so one captured graph serves
 * any request's settings). */
typedef struct frt_cuda_sampler_params {
    float temperature; /* 0 = greedy (argmax) */
    int32_t top_k;     /* 0 = off */
    float top_p;       /* 1 = off; in (0, 1] */
    int32_t reserved;  /* 0 */
} frt_cuda_sampler_params;

/* Bytes of workspace frt_cuda_sample needs for n logits into *bytes (asks
 * CUB for its sort storage: needs a current CUDA device; call at setup).
 * Errors: FRT_ERR_INVALID_ARGUMENT (n < 1 or n > 2^24, NULL); FRT_ERR_BACKEND. */
int frt_cuda_sample_workspace_bytes(int n, size_t *bytes);

/* Samples one token from logits [n] f32 (device):
 *   u = frt_rng_uniform(d_rng)       (one SplitMix64 step per call, always,
 *                                     whatever the temperature)
 *   *d_token = frt_cpu_sample(logits, n, temperature, top_k, top_p, u)
 * with the parameters read from *d_params. The tokens are ordered by
 * (logit desc, index asc) with a stable CUB radix sort (NaN as -inf), then one
 * block applies top-k, computes p_i = exp((l_i - l_max) / T) in fp64,
 * prefix sums over fixed thread segments, top-p and the draw. The prefix
 * sums are associated differently from the CPU's running sum (a relative
 * difference near 1e-16), so the token can differ from the CPU's only when u
 * falls within that distance of a boundary. Invalid parameters (temperature
 * < 0 or NaN, top_k < 0, top_p not in (0, 1]) write *d_token = -1.
 * workspace (device) of frt_cuda_sample_workspace_bytes(n) bytes.
 * 1 <= n <= 2^24. Twin: frt_cpu_sample. */
int frt_cuda_sample(void *stream, int32_t *d_token, const float *logits, int n,
                    const frt_cuda_sampler_params *d_params, uint64_t *d_rng, void *workspace,
                    size_t workspace_bytes);

/* ---- GEMM (cuBLASLt) ---------------------------------------------------- */

/* A cuBLASLt handle, its plan cache and one workspace per stream.
 *   y[n, out_dim] = x[n, in_dim] . w[out_dim, in_dim]^T   (+ y when accumulate)
 * x, w bf16; y f32 or bf16; fp32 compute (CUBLAS_COMPUTE_32F). The
 * algorithm of each shape is chosen once, at setup, by frt_cuda_gemm_plan
 * (cublasLtMatmulAlgoGetHeuristic, the top result); frt_cuda_gemm_run only
 * looks the plan up (never a heuristic in the hot path). n is the row count
 * of one graph variant (a prefill bucket or the decode batch): plans are per
 * bucket size. Twin: frt_cpu_matmul / frt_cpu_matmul_add. */
typedef struct frt_cuda_gemm frt_cuda_gemm;

/* One plan, for the model fingerprint: the key and the chosen algorithm. */
typedef struct frt_cuda_gemm_plan_info {
    int n, in_dim, out_dim;
    frt_cuda_dtype out_dtype;
    int accumulate;
    int algo_id, tile_id, stages_id, splitk_num, reduction_scheme, cta_swizzling, custom_option;
    uint64_t algo_data[8]; /* the raw cublasLtMatmulAlgo_t */
} frt_cuda_gemm_plan_info;

/* Creates the handle on the current device. workspace_bytes (0 allowed; 32
 * MiB is a good size on Hopper) is the size of each stream's workspace and
 * the limit given to the heuristic. Free with frt_cuda_gemm_destroy.
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_OUT_OF_MEMORY; FRT_ERR_BACKEND
 * (no device, cuBLASLt failure). On failure *out is NULL. */
int frt_cuda_gemm_create(size_t workspace_bytes, frt_cuda_gemm **out);

/* Frees the handle, its plans and workspaces (sync the streams first).
 * NULL is a no-op. */
void frt_cuda_gemm_destroy(frt_cuda_gemm *g);

/* Allocates the workspace of `stream` (cudaMalloc: at setup, never inside a
 * capture). Adding a stream twice is a no-op. At most 16 streams.
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_OUT_OF_RANGE (17th stream);
 * FRT_ERR_OUT_OF_MEMORY; FRT_ERR_BACKEND. */
int frt_cuda_gemm_add_stream(frt_cuda_gemm *g, void *stream);

/* Chooses and caches the algorithm for a shape (a no-op when cached).
 * in_dim and out_dim must be multiples of 8 (16-byte aligned rows).
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_UNSUPPORTED (no algorithm);
 * FRT_ERR_OUT_OF_RANGE (more than 1024 plans); FRT_ERR_OUT_OF_MEMORY;
 * FRT_ERR_BACKEND. */
int frt_cuda_gemm_plan(frt_cuda_gemm *g, int n, int in_dim, int out_dim, frt_cuda_dtype out_dtype,
                       int accumulate);

/* Enqueues y = x . w^T (+ y) with the cached plan. x, w, y 16-byte aligned
 * device pointers. Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_STATE (no plan
 * for the shape, or a workspace is needed and the stream was not added);
 * FRT_ERR_BACKEND. */
int frt_cuda_gemm_run(frt_cuda_gemm *g, void *stream, void *y, frt_cuda_dtype y_dtype,
                      const uint16_t *x, const uint16_t *w, int n, int in_dim, int out_dim,
                      int accumulate);

/* Number of cached plans (0 for NULL). */
int frt_cuda_gemm_plan_count(const frt_cuda_gemm *g);

/* Plan i (in the order they were made) into *info.
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_OUT_OF_RANGE. */
int frt_cuda_gemm_plan_get(const frt_cuda_gemm *g, int i, frt_cuda_gemm_plan_info *info);

#ifdef __cplusplus
}
#endif
#endif /* FRT_KERNELS_CUDA_H */
