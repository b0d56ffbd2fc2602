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

#include "frt/sampling.h"

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

/* frt_cuda_add_rmsnorm of delta = an FP8 GEMM's unscaled accumulator
 * (frt_cuda_gemm_fp8_run_acc, gemm_fp8.h) scaled as that GEMM's epilogue
 * scales it:
 *   delta[t, o] = (acc[t, o] * x_scale[t]) * w_scale[o]   (two fp32 roundings)
 * then the residual add and the norm, bit for bit frt_cuda_gemm_fp8_run's
 * output (epilogue scaling) followed by frt_cuda_add_rmsnorm, with one
 * pass over the output instead of two. acc [max_n, dim] f32, x_scale
 * [max_n] f32 (the per-token scales of the GEMM's input), w_scale [dim]
 * f32 (the weight's per-channel scales), device. Errors: those of
 * frt_cuda_add_rmsnorm, FRT_ERR_INVALID_ARGUMENT for NULL scales.
 * Twin: the epilogue's two products, frt_cpu_add, frt_cpu_rmsnorm
 * (tests/test_cuda_gemm_fp8.c). */
int frt_cuda_add_rmsnorm_fp8acc(void *stream, float *resid, const float *acc, const float *x_scale,
                                const float *w_scale, void *out, frt_cuda_dtype out_dtype, const float *w,
                                const int32_t *d_n, int max_n, int dim, float eps, int zero_centered);

/* The residual add and norm of frt_cuda_add_rmsnorm (x_scale and w_scale
 * NULL) or frt_cuda_add_rmsnorm_fp8acc (both set; delta is then the f32
 * accumulator) with a bf16 out, and out quantized per token in the same
 * launch, the input of an FP8 prefill GEMM (docs/fp8.md "FP8 activations"):
 * for t < n, q[t, :] and q_scale[t] are the bits
 * frt_cuda_fp8_quantize_rows_dynamic writes for out[t, :] (the row's max
 * |out| with NaN skipped, scale = max / 448 with its rules, codes at 1 /
 * scale); one pass instead of two launches. q [max_n, dim] E4M3 codes,
 * q_scale [max_n] f32 (4-byte aligned), device; out NULL: the bf16 row is
 * not stored (only its codes; the same codes); q_scale may be x_scale
 * (in place: row t's x_scale is read before its q_scale is written). Rows
 * t >= n: resid and out untouched, q zero and q_scale 1 (an all-zero row's
 * quantization: the GEMM after it reads zeros there, not stale codes). Errors: those of frt_cuda_add_rmsnorm;
 * FRT_ERR_INVALID_ARGUMENT for a NULL q or q_scale, one of x_scale /
 * w_scale without the other, an accumulator delta that is not f32, q or
 * q_scale aliasing an input or out. Twin: frt_cpu_add, frt_cpu_rmsnorm,
 * bf16 rounding, frt_fp8_quantize_rows_dynamic (tests/test_cuda_gemm_fp8.c
 * checks it bit for bit against the two launches). */
int frt_cuda_add_rmsnorm_quant(void *stream, float *resid, const void *delta, frt_cuda_dtype delta_dtype,
                               const float *x_scale, const float *w_scale, uint16_t *out, uint8_t *q, float *q_scale,
                               const float *w, const int32_t *d_n, int max_n, int dim, float eps, int zero_centered);

/* Gated RMSNorm (the Gated DeltaNet output norm), rows of [max_n, n_heads, dim]:
 *   out = (w * (x * rsqrt(mean(x^2) + eps))) * silu(z)
 * x of x_dtype, z of z_dtype, out of out_dtype, all [max_n, n_heads, dim];
 * w [dim] f32 (plain weight). out may equal x or z when the dtypes match.
 * Twin: frt_cpu_rmsnorm_gated. */
int frt_cuda_rmsnorm_gated(void *stream, void *out, frt_cuda_dtype out_dtype, const void *x,
                           frt_cuda_dtype x_dtype, const void *z, frt_cuda_dtype z_dtype,
                           const float *w, const int32_t *d_n, int max_n, int n_heads, int dim,
                           float eps);

/* frt_cuda_rmsnorm_gated (the same bits) with z read at a token stride: z of
 * token t, head h at z + t * z_stride + h * dim (elements, z_stride >=
 * n_heads * dim), e.g. the z columns of a wider fused projection; out must
 * not alias a strided z. Errors: those of frt_cuda_rmsnorm_gated;
 * FRT_ERR_INVALID_ARGUMENT for a short z_stride or out == z with a stride. */
int frt_cuda_rmsnorm_gated_strided(void *stream, void *out, frt_cuda_dtype out_dtype, const void *x,
                                   frt_cuda_dtype x_dtype, const void *z, frt_cuda_dtype z_dtype,
                                   int z_stride, const float *w, const int32_t *d_n, int max_n,
                                   int n_heads, int dim, float eps);

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

/* frt_cuda_kv_append into an FP8 E4M3 cache (docs/fp8.md), for t < n:
 *   k_cache[start + t, j, i] = e4m3_satfinite(k[t, j, i] * (1 / k_scale[j]))
 *   v_cache[start + t, j, i] = e4m3_satfinite(v[t, j, i] * (1 / v_scale[j]))
 * per KV head j. k, v [max_n, n_kv_heads, head_dim] f32; k_cache, v_cache
 * [max_seq, n_kv_heads, head_dim] E4M3 codes (u8); k_scale, v_scale
 * [n_kv_heads] f32 > 0 (static per-head scales); all device memory. Rows
 * start + t >= max_seq are dropped. The bits of frt_fp8_quantize_rows
 * (kernels/cpu/fp8.h) over the rows (t, j) with n_scales = n_kv_heads
 * (tests/test_cuda_fp8_kv.c). Errors: FRT_ERR_INVALID_ARGUMENT (NULL
 * pointer, sizes out of range, n_kv_heads > 4096), FRT_ERR_BACKEND. */
int frt_cuda_kv_append_fp8(void *stream, uint8_t *k_cache, uint8_t *v_cache, const float *k, const float *v,
                           const float *k_scale, const float *v_scale, const int32_t *d_start,
                           const int32_t *d_n, int max_n, int max_seq, int n_kv_heads, int head_dim);

/* Largest head_dim frt_cuda_attn_decode_prep takes. */
#define FRT_CUDA_ATTN_PREP_MAX_HD 2048

/* The pre-attention work of a full-attention layer for ONE decode token, in
 * one launch (nothing when *d_n == 0; d_n NULL means 1), position start =
 * *d_start:
 *   per query head h:  q = qg[h] (the first head_dim of each row of
 *                      2 * head_dim when gated, else rows of head_dim)
 *                      q_out[h] = rope(rmsnorm(q, q_norm_w))
 *                      zg_out[h] = the gate half of qg[h] (gated only)
 *   per KV head j:     k_cache[start, j] = bf16(rope(rmsnorm(k[j], k_norm_w)))
 *                      v_cache[start, j] = bf16(v[j])
 * qg [n_heads, gated ? 2 * head_dim : head_dim] f32; k, v [n_kv_heads,
 * head_dim] f32 (read only: k is not normalised in place); q_norm_w,
 * k_norm_w [head_dim] f32; q_out, zg_out [n_heads, head_dim] f32 (zg_out
 * unused, may be NULL, when !gated); k_cache, v_cache [max_seq, n_kv_heads,
 * head_dim] bf16. No output may alias an input or another output. A start
 * >= max_seq writes no cache row (as frt_cuda_kv_append); q and the gate
 * are still written. rmsnorm and rope as frt_cuda_rmsnorm (eps,
 * zero_centered: 1 + w) and frt_cuda_rope (rot_dim, theta): the same bits as
 * the unfused sequence frt_cuda_copy_rows (q, gate) + frt_cuda_rmsnorm (q,
 * k) + frt_cuda_rope (q, k) + frt_cuda_kv_append. head_dim
 * 1..FRT_CUDA_ATTN_PREP_MAX_HD; rot_dim even, 2..min(head_dim,
 * FRT_CUDA_ROPE_MAX_ROT). Errors: FRT_ERR_INVALID_ARGUMENT (NULL pointer,
 * aliasing outputs, sizes out of range).
 * Twins: frt_cpu_rmsnorm then frt_cpu_rope with pos = start. */
int frt_cuda_attn_decode_prep(void *stream, float *q_out, float *zg_out, uint16_t *k_cache,
                              uint16_t *v_cache, const float *qg, const float *k, const float *v,
                              const float *q_norm_w, const float *k_norm_w,
                              const int32_t *d_start, const int32_t *d_n, int max_seq,
                              int n_heads, int n_kv_heads, int head_dim, int rot_dim, float theta,
                              float eps, int zero_centered, int gated);

/* frt_cuda_attn_decode_prep for the max_n tokens of a prefill piece (n =
 * *d_n of them valid; rows t >= n are neither read nor written): token t at
 * position start + t, its qg row at qg + t * qg_stride, its k and v rows at
 * k + t * k_stride and v + t * v_stride (elements; at least a token's row
 * each, e.g. the q | k | v columns of one fused GEMM output); q_out and
 * zg_out [max_n, n_heads, head_dim]; cache rows start + t. The same bits as
 * the unfused sequence on the same rows (frt_cuda_rope's angle of token t is
 * (float)(start + t) * inv_freq). max_n 0..65535 (0 enqueues nothing; the
 * strides are ignored at max_n 1). Errors: those of
 * frt_cuda_attn_decode_prep; FRT_ERR_INVALID_ARGUMENT for max_n out of
 * range or a stride shorter than a token's row. */
int frt_cuda_attn_prep(void *stream, float *q_out, float *zg_out, uint16_t *k_cache, uint16_t *v_cache,
                       const float *qg, int qg_stride, const float *k, int k_stride, const float *v,
                       int v_stride, const float *q_norm_w, const float *k_norm_w, const int32_t *d_start,
                       const int32_t *d_n, int max_n, int max_seq, int n_heads, int n_kv_heads, int head_dim,
                       int rot_dim, float theta, float eps, int zero_centered, int gated);

/* frt_cuda_attn_prep appending to an FP8 E4M3 cache (docs/fp8.md): k_cache
 * and v_cache [max_seq, n_kv_heads, head_dim] E4M3 codes, the rows written
 * as frt_cuda_kv_append_fp8 writes them (K after the norm and RoPE, V as
 * given, each element e4m3_satfinite(x * (1 / scale[j])) for KV head j);
 * k_scale, v_scale [n_kv_heads] f32 > 0 (device). q_out and zg_out as
 * frt_cuda_attn_prep's. The same bits as the unfused sequence (copy_rows,
 * rmsnorm, rope, frt_cuda_kv_append_fp8; tests/test_cuda_attn_prep.c).
 * Errors: those of frt_cuda_attn_prep; FRT_ERR_INVALID_ARGUMENT for NULL
 * scales. */
int frt_cuda_attn_prep_fp8(void *stream, float *q_out, float *zg_out, uint8_t *k_cache, uint8_t *v_cache,
                           const float *k_scale, const float *v_scale, const float *qg, int qg_stride,
                           const float *k, int k_stride, const float *v, int v_stride, const float *q_norm_w,
                           const float *k_norm_w, const int32_t *d_start, const int32_t *d_n, int max_n,
                           int max_seq, int n_heads, int n_kv_heads, int head_dim, int rot_dim, float theta,
                           float eps, int zero_centered, int gated);

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
 *     rows; each split's partial (max, sum, unnormalised output) of each
 *     query goes to workspace and a combine kernel merges the splits of each
 *     query (fixed order). head_dim 64, 128 or 256 with 16-byte aligned
 *     caches take the tensor-core decode kernel (attention.cu): the query
 *     heads of a KV head in chunks of up to 4 share every K/V tile, q and the
 *     softmax weights enter bf16 mma.sync as three bf16 terms each (their
 *     sum is the fp32 value, so the products are exact: fp32 accuracy, rel
 *     error ~1e-6 against the twin), one wave of blocks each streams a
 *     contiguous range of splits through a cp.async pipeline. Other sizes
 *     take the prefill kernel's split form. The partition into splits is
 *     split_len only (never the grid, the SM count or the position), so a
 *     replayed graph gives the eager bits at every position. Decode is
 *     max_n = 1 with a split_len such as 128; any max_n works (the same
 *     call serves a prefill over a long cache). workspace (device, 4-byte
 *     aligned) must hold frt_cuda_attention_workspace_bytes(...) bytes.
 *     The decode kernel is launched with programmatic dependent launch and
 *     stages its first K / V tiles below the position before it waits for
 *     the kernel before it: *d_start, *d_n and the cache rows below
 *     *d_start must not be written by a kernel of the same stream that the
 *     launch may overlap (frt writes them with the host, or in earlier
 *     steps' launches, which complete in stream order; q and the rows at
 *     and past *d_start may come from the kernel just before).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL out, q, cache or d_start; bad
 * dtype; sizes out of range; out == q; split_len < 0; more than 65535
 * splits; workspace NULL or short), FRT_ERR_UNSUPPORTED (the decode
 * kernel's shared memory does not fit the device), FRT_ERR_BACKEND.
 * Twin: frt_cpu_attention (start_pos = start) on the widened cache. */
int frt_cuda_attention(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q,
                       frt_cuda_dtype q_dtype, const uint16_t *k_cache, const uint16_t *v_cache,
                       const int32_t *d_start, const int32_t *d_n, int max_n, int max_seq,
                       int n_heads, int n_kv_heads, int head_dim, float scale, int split_len,
                       void *workspace, size_t workspace_bytes);

/* frt_cuda_attention over an FP8 E4M3 KV cache (docs/fp8.md): the same
 * arguments, semantics, errors and workspace
 * (frt_cuda_attention_workspace_bytes), with k_cache, v_cache [max_seq,
 * n_kv_heads, head_dim] E4M3 codes (u8) and k_scale, v_scale [n_kv_heads]
 * f32 (device). The result is attention over the dequantized cache,
 * decode(code) * scale[KV head] (frt_fp8_dequantize_rows), at fp32
 * accuracy:
 *   split_len > 0, head_dim 64, 128 or 256, 16-byte aligned caches: the
 *     tensor-core decode kernel of frt_cuda_attention, the codes widened to
 *     bf16 (exact) in shared memory, the scales applied where they are
 *     exact algebra: scores (q . k_code) * (scale * s_k), outputs
 *     (P . v_code) * s_v (per split, before the combine);
 *   otherwise (split_len 0, other head sizes): the CUDA-core kernel
 *     (attn_kernel), each key and value dequantized on load in f32.
 * Alignment: none beyond the element (the CUDA-core form when not 16-byte
 * aligned). Twin: frt_cpu_attention on frt_fp8_dequantize_rows of the cache
 * (tests/test_cuda_fp8_kv.c). */
int frt_cuda_attention_fp8(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q,
                           frt_cuda_dtype q_dtype, const uint8_t *k_cache, const uint8_t *v_cache,
                           const float *k_scale, const float *v_scale, const int32_t *d_start,
                           const int32_t *d_n, int max_n, int max_seq, int n_heads, int n_kv_heads,
                           int head_dim, float scale, int split_len, void *workspace, size_t workspace_bytes);

/* Bytes of workspace frt_cuda_attention needs for these sizes (0 when
 * split_len == 0, or for invalid sizes). */
size_t frt_cuda_attention_workspace_bytes(int max_n, int max_seq, int n_heads, int head_dim,
                                          int split_len);

/* Flash-decoding of n_branches independent sequences in one launch pair
 * (the batched decode of branch slots, frt/branch.h): branch b has one query
 * token, q[b] [n_heads, head_dim] f32, at position *d_starts[b] over its own
 * bf16 cache d_k_caches[b] / d_v_caches[b] [max_seq, n_kv_heads, head_dim];
 * out[b] [n_heads, head_dim] of out_dtype (f32, or bf16: the f32 result
 * rounded once, RNE, the bits of frt_cuda_convert of the f32 output). d_k_caches, d_v_caches, d_starts: device
 * arrays of n_branches device pointers (16-byte aligned caches). Branch b
 * gets the same bits as frt_cuda_attention(out[b], q[b], its caches, its
 * start, d_n NULL, max_n 1, ..., split_len) alone: the same kernels, split
 * partition and combine order (the split partition depends on split_len
 * only, never on the grid). workspace: n_branches x
 * frt_cuda_attention_workspace_bytes(1, max_seq, n_heads, head_dim,
 * split_len). head_dim 64, 128 or 256 (the tensor-core decode kernel), else
 * FRT_ERR_UNSUPPORTED.
 * d_shared: NULL, or a device array [n_branches] of row counts: branch b
 * reads its cache rows j < d_shared[b] from branch 0's caches instead of
 * its own (a fork's common prefix, kept in every slot but streamed from
 * HBM once: the branches' blocks run in one wave and share it through L2).
 * The caller guarantees those rows hold the same bytes in both caches, so
 * the result is the same bits either way. Errors: FRT_ERR_INVALID_ARGUMENT
 * (NULL, sizes, split_len 0, short workspace), FRT_ERR_UNSUPPORTED,
 * FRT_ERR_BACKEND.
 * Twin: frt_cuda_attention per branch (tests/test_cuda_attn_decode.c). */
int frt_cuda_attention_batch(void *stream, void *out, frt_cuda_dtype out_dtype, const float *q,
                             const uint16_t *const *d_k_caches, const uint16_t *const *d_v_caches,
                             const int32_t *const *d_starts, const int32_t *d_shared, int n_branches, int max_seq,
                             int n_heads,
                             int n_kv_heads, int head_dim, float scale, int split_len, void *workspace,
                             size_t workspace_bytes);

/* frt_cuda_attention_batch over FP8 E4M3 caches: d_k_caches, d_v_caches
 * device arrays of n_branches device pointers to [max_seq, n_kv_heads,
 * head_dim] codes (16-byte aligned), k_scale, v_scale [n_kv_heads] f32
 * (device; one layer's scales, the same for every branch). Branch b gets
 * the bits of frt_cuda_attention_fp8(out[b], q[b], its caches, the scales,
 * its start, d_n NULL, max_n 1, ..., split_len) alone (the same kernels and
 * orders); d_shared as for frt_cuda_attention_batch. Errors: those of
 * frt_cuda_attention_batch, FRT_ERR_INVALID_ARGUMENT for NULL scales.
 * Twin: frt_cuda_attention_fp8 per branch (tests/test_cuda_fp8_kv.c). */
int frt_cuda_attention_batch_fp8(void *stream, void *out, frt_cuda_dtype out_dtype, const float *q,
                                 const uint8_t *const *d_k_caches, const uint8_t *const *d_v_caches,
                                 const float *k_scale, const float *v_scale, const int32_t *const *d_starts,
                                 const int32_t *d_shared, int n_branches, int max_seq, int n_heads, int n_kv_heads,
                                 int head_dim, float scale, int split_len, void *workspace, size_t workspace_bytes);

/* The prefill form of frt_cuda_attention on tensor cores (flash_attention.cu):
 * the same arguments, semantics and result (causal GQA over the bf16 cache,
 * token t sees cache rows 0 .. min(start + t, max_seq - 1), rows t >= n
 * untouched), computed as FlashAttention-2 (Dao 2023) with bf16 mma.sync:
 * Q rounded to bf16 (RNE) when staged, P rounded to bf16 for P.V, scores,
 * softmax and accumulation in fp32; relative error ~1e-3 against the fp32
 * twin (tested to 1e-2). The query rows of a block are 64 (token, head)
 * pairs of one KV head, so a GQA group shares the K/V tiles. When the cache
 * may span more than one split (split length from max_n and n_heads only:
 * max_n * n_heads / 2 keys rounded up to 64, clamped to [512, 4096]; the
 * wgmma form at head_dim 128 rounds up to 128 and clamps to [1024, 8192], and
 * takes longer splits where a launch of at most 2 blocks of 128 rows a KV
 * head would need a second wave of blocks at max_seq), the
 * keys are cut into splits whose partials go to `workspace` and a combine
 * kernel merges them in ascending order (deterministic, no atomics).
 * head_dim 64, 128 or 256, else FRT_ERR_UNSUPPORTED (call
 * frt_cuda_attention instead); q, out, k_cache, v_cache must be 16-byte
 * aligned (else FRT_ERR_UNSUPPORTED too). workspace (device, 16-byte
 * aligned) of frt_cuda_attention_prefill_workspace_bytes(max_n, ...) bytes;
 * it may be NULL when that is 0. The kernels are launched with
 * programmatic dependent launch, and the wgmma form stages its first K / V
 * tiles wholly below the position before it waits for the kernel before
 * it: *d_start, *d_n and the cache rows below *d_start must not be written
 * by a kernel of the same stream that the launch may overlap (as for
 * frt_cuda_attention; q and the rows at and past *d_start may come from
 * the kernel just before). Its blocks let the launches after them start
 * only once they waited, so a following launch never overlaps the kernels
 * before this one (two pieces launches after one prep). Errors: FRT_ERR_INVALID_ARGUMENT (NULL
 * pointer, bad dtype or sizes, out == q, non-finite scale, workspace too
 * small); FRT_ERR_UNSUPPORTED; FRT_ERR_BACKEND.
 * Twin: frt_cpu_attention (start_pos = start) on the widened cache, q
 * rounded to bf16 (tests/test_cuda_flash_attention.c). */
/* 1 when the FlashAttention prefill kernels (frt_cuda_attention_prefill
 * and its _pieces / _fp8 forms) take head_dim: 64, 128 or 256; else they
 * return FRT_ERR_UNSUPPORTED. */
int frt_cuda_attention_prefill_head_ok(int head_dim);

int frt_cuda_attention_prefill(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q,
                               frt_cuda_dtype q_dtype, const uint16_t *k_cache,
                               const uint16_t *v_cache, const int32_t *d_start, const int32_t *d_n,
                               int max_n, int max_seq, int n_heads, int n_kv_heads, int head_dim,
                               float scale, void *workspace, size_t workspace_bytes);

/* frt_cuda_attention_prefill with a restore source (the append after a
 * device-tier capsule in one call, frt_capsule_restore_prefill; docs/model.md
 * "Restore and append in one call"): the cache rows 0 .. rows - 1 of this
 * layer are read from the source instead of k_cache / v_cache, and written
 * into k_cache / v_cache by the same launch from the shared memory they
 * were staged in (the tensor copy engine's stores), so the restore's copy
 * costs the writes only. d_src: device memory of FRT_CUDA_KV_SRC_BYTES,
 * 128-byte aligned, written by frt_cuda_kv_src_encode (copied there before
 * the launch runs; a captured launch reads each replay's); rows 0: the
 * plain launch. The rows at and past the source's come from the cache as
 * before; rows must be <= *d_start (every query reads every source row),
 * so the cache holds the source's bytes below rows after the launch,
 * whatever d_n. The output has frt_cuda_attention_prefill's bits on a cache
 * holding the source's rows (the same values through the same kernel).
 * Errors: those of frt_cuda_attention_prefill; FRT_ERR_INVALID_ARGUMENT
 * (d_src NULL or not 128-byte aligned); FRT_ERR_UNSUPPORTED where
 * frt_cuda_attention_prefill_src_ok is 0. */
#define FRT_CUDA_KV_SRC_BYTES 384
int frt_cuda_attention_prefill_src(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q,
                                   frt_cuda_dtype q_dtype, const uint16_t *k_cache, const uint16_t *v_cache,
                                   const int32_t *d_start, const int32_t *d_n, int max_n, int max_seq, int n_heads,
                                   int n_kv_heads, int head_dim, float scale, void *workspace, size_t workspace_bytes,
                                   const void *d_src);

/* 1 when frt_cuda_attention_prefill_src takes a launch of these sizes (a
 * bf16 cache with head_dim 128 in launches that fill whole 128-row blocks:
 * the wgmma form), else 0. */
int frt_cuda_attention_prefill_src_ok(int max_n, int n_heads, int n_kv_heads, int head_dim);

/* Host: fills desc (FRT_CUDA_KV_SRC_BYTES) with the source of rows rows:
 * k_rows, v_rows [rows, n_kv_heads, head_dim] bf16 (device, 16-byte
 * aligned); rows 0: no source (k_rows, v_rows unused). Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL, rows < 0, n_kv_heads < 1);
 * FRT_ERR_UNSUPPORTED (head_dim other than 128, rows not a multiple of 128,
 * misaligned rows, no tensor-map encoder in the driver); FRT_ERR_BACKEND. */
int frt_cuda_kv_src_encode(void *desc, const void *k_rows, const void *v_rows, int rows, int n_kv_heads,
                           int head_dim);

/* frt_cuda_attention_prefill over an FP8 E4M3 KV cache (docs/fp8.md): the
 * same arguments, semantics, errors, alignment and workspace, with k_cache,
 * v_cache [max_seq, n_kv_heads, head_dim] E4M3 codes (u8, 16-byte aligned)
 * and k_scale, v_scale [n_kv_heads] f32 (device). The K and V tiles are
 * staged as codes and widened to bf16 in shared memory (exact: every E4M3
 * value is a bf16 value), the same mma as the bf16 cache; the per-KV-head
 * scales enter as exact algebra: scores (q . k_code) * (scale * s_k)
 * (folded into the softmax scale), out = (P . v_code) / l * s_v. The result
 * is frt_cuda_attention_prefill's on the dequantized cache up to the
 * rounding of the scale products (Q and P rounded to bf16 as there).
 * Errors: those of frt_cuda_attention_prefill, FRT_ERR_INVALID_ARGUMENT for
 * NULL scales. Twin: frt_cpu_attention on frt_fp8_dequantize_rows of the
 * cache, q rounded to bf16 (tests/test_cuda_fp8_kv.c). */
int frt_cuda_attention_prefill_fp8(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q,
                                   frt_cuda_dtype q_dtype, const uint8_t *k_cache, const uint8_t *v_cache,
                                   const float *k_scale, const float *v_scale, const int32_t *d_start,
                                   const int32_t *d_n, int max_n, int max_seq, int n_heads, int n_kv_heads,
                                   int head_dim, float scale, void *workspace, size_t workspace_bytes);

/* Bytes of workspace frt_cuda_attention_prefill needs (the split partials:
 * n_splits x max_n x n_heads x (head_dim + 2) floats), enough for every
 * launch with max_n' <= max_n and the same other sizes (one workspace serves
 * all prefill buckets). 0 when one split covers max_seq, or for invalid
 * sizes. */
size_t frt_cuda_attention_prefill_workspace_bytes(int max_n, int max_seq, int n_heads,
                                                  int head_dim);

/* frt_cuda_attention_prefill{,_fp8} over max_n rows that are max_n /
 * piece_rows prefill pieces of piece_rows rows each (docs/architectures.md
 * "Prefill groups"): one launch with the key splits of a launch of
 * piece_rows rows (the split length depends on the launch's rows), so every
 * row gets the bits it gets in a launch over its piece alone at that
 * piece's start (a (row, split) partial depends on that row's keys only;
 * tests/test_cuda_flash_attention.c). Workspace:
 * frt_cuda_attention_prefill_pieces_workspace_bytes. Errors: those of
 * frt_cuda_attention_prefill, and FRT_ERR_INVALID_ARGUMENT when max_n is not
 * a multiple of piece_rows. */
int frt_cuda_attention_prefill_pieces(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q,
                                      frt_cuda_dtype q_dtype, const uint16_t *k_cache, const uint16_t *v_cache,
                                      const int32_t *d_start, const int32_t *d_n, int max_n, int piece_rows,
                                      int max_seq, int n_heads, int n_kv_heads, int head_dim, float scale,
                                      void *workspace, size_t workspace_bytes);
int frt_cuda_attention_prefill_pieces_fp8(void *stream, void *out, frt_cuda_dtype out_dtype, const void *q,
                                          frt_cuda_dtype q_dtype, const uint8_t *k_cache, const uint8_t *v_cache,
                                          const float *k_scale, const float *v_scale, const int32_t *d_start,
                                          const int32_t *d_n, int max_n, int piece_rows, int max_seq, int n_heads,
                                          int n_kv_heads, int head_dim, float scale, void *workspace,
                                          size_t workspace_bytes);

/* Bytes of workspace of one frt_cuda_attention_prefill_pieces launch of
 * exactly max_n rows (0: one split covers max_seq, or invalid sizes). */
size_t frt_cuda_attention_prefill_pieces_workspace_bytes(int max_n, int piece_rows, int max_seq, int n_heads,
                                                         int head_dim);

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

/* frt_cuda_conv1d_causal (the same bits) on strided rows of x: x[t, c] at
 * x + t * x_stride + c (elements, x_stride >= channels), e.g. the q | k | v
 * columns of a wider fused projection. Errors: those of
 * frt_cuda_conv1d_causal; FRT_ERR_INVALID_ARGUMENT for x_stride < channels. */
int frt_cuda_conv1d_causal_strided(void *stream, void *out, frt_cuda_dtype out_dtype, const void *x,
                                   frt_cuda_dtype x_dtype, int x_stride, float *conv_state,
                                   const float *w, const int32_t *d_n, int max_n, int channels,
                                   int kernel);

/* frt_cuda_conv1d_causal_strided (the same values) with the output columns
 * split over n_outs (1..3) buffers: columns [sum of widths before i, + widths[i])
 * go to outs[i] [max_n, widths[i]] of out_dtype (contiguous rows), e.g. the
 * Gated DeltaNet's q, k, v straight out of the conv. The widths (>= 1) must
 * add up to channels; no output may alias x. With l2_channels > 0 the
 * outputs of channels [0, l2_channels) are also L2-normalised in groups of
 * l2_dim, as frt_cuda_l2norm (y * (1 / sqrtf((float)sum y^2 + l2_eps)), the
 * sum in fp64; the q and k heads): l2_channels must be a multiple of 256
 * and l2_dim a multiple of 32 dividing 256, else FRT_ERR_UNSUPPORTED
 * (nothing enqueued). Errors: those of frt_cuda_conv1d_causal_strided;
 * FRT_ERR_INVALID_ARGUMENT for NULL outs / widths, a bad n_outs, widths that
 * do not cover the channels, or l2_channels outside [0, channels]. */
int frt_cuda_conv1d_causal_split(void *stream, void *const *outs, const int *widths, int n_outs,
                                 frt_cuda_dtype out_dtype, const void *x, frt_cuda_dtype x_dtype,
                                 int x_stride, float *conv_state, const float *w, const int32_t *d_n,
                                 int max_n, int channels, int kernel, int l2_channels, int l2_dim,
                                 float l2_eps);

/* The Gated DeltaNet gates:
 *   g = -exp(A_log[h]) * softplus(a + dt_bias[h]),  beta = sigmoid(b)
 * a, b [max_n, n_heads] of ab_dtype; g, beta [max_n, n_heads] f32;
 * A_log, dt_bias [n_heads] f32. Twin: frt_cpu_gdn_gate. */
int frt_cuda_gdn_gate(void *stream, float *g, float *beta, const void *a, const void *b,
                      frt_cuda_dtype ab_dtype, const float *A_log, const float *dt_bias,
                      const int32_t *d_n, int max_n, int n_heads);

/* frt_cuda_gdn_gate with a and b read from rows of ab_stride elements (row t
 * of a at a + t * ab_stride; the same for b), e.g. the b and a columns of the
 * fused in_proj_qkv | z | b | a output in place; the same bits. Errors also
 * FRT_ERR_INVALID_ARGUMENT for ab_stride < n_heads. */
int frt_cuda_gdn_gate_strided(void *stream, float *g, float *beta, const void *a, const void *b,
                              frt_cuda_dtype ab_dtype, int ab_stride, const float *A_log,
                              const float *dt_bias, const int32_t *d_n, int max_n, int n_heads);

/* The gated delta rule, token by token (decode; any n):
 * state [n_v_heads, dk, dv] f32 (device, read and updated in place);
 * q, k [max_n, n_k_heads, dk] and v [max_n, n_v_heads, dv] of in_dtype, q and
 * k already L2-normalised (frt_cuda_l2norm); the kernel scales q by
 * dk^-0.5 itself; g, beta [max_n, n_v_heads] f32; out [max_n, n_v_heads, dv]
 * of out_dtype. Per token and value head, S = state[h]:
 *   S *= exp(g); kv = S^T k; delta = (v - kv) beta; S += k (x) delta; o = S^T q dk^-0.5
 * One block of 8 warps per (value head, 32 columns of dv): the state is
 * held in registers (read once, written once), the warps split dk and their
 * partial sums meet in a fixed order (not the twin's single ascending sum;
 * deterministic). 1 <= dk <= 256; n_v_heads a multiple of n_k_heads.
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
 * cumulative decay, unit lower triangular solve, inter-chunk state scan).
 * Two launches (the flash-linear-attention split): an intra-chunk kernel,
 * one block per (chunk, value head), writes what does not depend on the
 * state (U, W, the intra-chunk attention, the decays) to `workspace`; a scan
 * kernel, one block per (value head, 32 columns of dv), carries the state
 * over the chunks (held in registers). The matrix products run on the
 * tensor cores as 3xTF32 (each fp32 operand split into tf32 hi + lo, three
 * mma.sync per product, every k step of 8 accumulated in fp32 round to
 * nearest): error at the level of the fp32 twin (~3e-7 norm-wise on random
 * data, no growth over 32k tokens). Every element is summed in a fixed order
 * (bits reproducible); splitting a prefill into calls at multiples of
 * `chunk` gives the same bits as one call. The tail chunk has its real rows
 * only. q, k, v f32 with dk, dv multiples of 4 at 16-byte aligned addresses
 * are staged by cp.async, other inputs by plain loads (same bits).
 * workspace (device, 16-byte aligned, contents scratch: overwritten) must
 * hold frt_cuda_gdr_chunked_workspace_bytes(max_n, n_k_heads, n_v_heads, dk,
 * dv, chunk) bytes; it may be NULL only when that is 0 (max_n 0). Calls on
 * one stream may share it.
 * 1 <= chunk <= FRT_CUDA_GDR_MAX_CHUNK. dk > 128 is FRT_ERR_UNSUPPORTED;
 * the kernels need 194 / 190 KiB of shared memory per block whatever the
 * sizes (H100/H200: 227 KiB), and a device with less is FRT_ERR_UNSUPPORTED
 * too (checked before anything is enqueued: needs a current device). A
 * NULL, short or misaligned workspace is FRT_ERR_INVALID_ARGUMENT.
 * Source: flash-linear-attention chunk_gated_delta_rule_fwd (the split);
 * CUTLASS's 3xTF32 "fast fp32" tensor-op GEMM (the split products).
 * Twin: frt_cpu_gdr_chunked. */
int frt_cuda_gdr_chunked(void *stream, void *out, frt_cuda_dtype out_dtype, float *state,
                         const void *q, const void *k, const void *v, frt_cuda_dtype in_dtype,
                         const float *g, const float *beta, const int32_t *d_n, int max_n,
                         int n_k_heads, int n_v_heads, int dk, int dv, int chunk,
                         void *workspace, size_t workspace_bytes);

/* Bytes of workspace frt_cuda_gdr_chunked needs for these sizes: per chunk
 * of max_n (ceil(max_n / chunk)) and value head, with cp = chunk and dk4 = dk
 * rounded up to 4 and dvb = dv rounded up to 32, (3 dk4 cp + cp^2 + cp dvb +
 * 4) floats (~144 KiB at dk = dv = 128, chunk 64: 18 MiB for max_n 256 and 32
 * value heads). 0 for max_n 0 or sizes frt_cuda_gdr_chunked does not take. */
size_t frt_cuda_gdr_chunked_workspace_bytes(int max_n, int n_k_heads, int n_v_heads, int dk,
                                            int dv, int chunk);

/* The decode token step of frt_cuda_conv1d_causal (max_n 1) in ONE launch:
 *   out[c] = silu(sum_{j < kernel} w[c, j] * xpad[j, c]),  xpad = [state, x]
 * then conv_state[c] shifts by one (the oldest drops, x[c] enters last).
 * x [channels] of x_dtype; out [channels] of out_dtype (must not alias x);
 * w [channels, kernel] f32; conv_state [channels, kernel - 1] f32 (may be
 * NULL only for kernel 1). d_n (NULL: 1) clamped to [0, 1]; 0 reads and
 * writes nothing. One thread per channel, taps summed j ascending as the
 * twin. 1 <= kernel <= 64. Twin: frt_cpu_conv1d_causal with n_tok 1. */
int frt_cuda_conv1d_step(void *stream, void *out, frt_cuda_dtype out_dtype, const void *x,
                         frt_cuda_dtype x_dtype, float *conv_state, const float *w,
                         const int32_t *d_n, int channels, int kernel);

/* The whole Gated DeltaNet decode step after the input projections, for
 * one token, in ONE launch (replaces conv1d x2, copy_rows x3, l2norm x2,
 * gdn_gate, gdr_recurrent and rmsnorm_gated). With kd = n_k_heads dk,
 * channels ch = 2 kd + n_v_heads dv, per value head h and key head
 * kh = h / (n_v_heads / n_k_heads):
 *   qkv[c] = silu(sum_{j < kernel} conv_w[c, j] xpad[j, c]),  xpad = [conv_state[c], x[c]]
 *   conv_state[c] shifts by one (the oldest drops, x[c] enters last)
 *   q = l2norm(qkv[kh dk ..]), k = l2norm(qkv[kd + kh dk ..])   (eps 1e-6)
 *   g = -exp(A_log[h]) softplus(a[h] + dt_bias[h]), beta = sigmoid(b[h])
 *   S = state[h]: S *= exp(g); kv = S^T k; delta = (v - kv) beta;
 *                 S += k (x) delta; o = S^T q dk^-0.5   (v = qkv[2 kd + h dv ..])
 *   ob[h] = (norm_w * (o * rsqrt(mean(o^2) + eps))) * silu(zg[h])
 * x [ch] of x_dtype (the fused GEMV's q | k | v before the conv); conv_w
 * [ch, kernel] f32; conv_state [ch, kernel - 1] f32 (device, updated in
 * place; may be NULL only for kernel 1); zg [n_v_heads, dv] f32; a, b,
 * A_log, dt_bias [n_v_heads] f32; norm_w [dv] f32 (plain weight); state
 * [n_v_heads, dk, dv] f32 (device, updated in place); ob [n_v_heads, dv] of
 * ob_dtype; qkv_out [ch] f32 or NULL: the conv output, written only when
 * not NULL (the tests read it; the model passes NULL). ob and qkv_out must
 * not alias an input, the states or each other. state, zg, norm_w and ob
 * 16-byte aligned (ob 8 for bf16). d_n (NULL: 1) clamped to [0, 1]; 0
 * writes nothing (state, conv_state, ob and qkv_out untouched; the inputs
 * are still read). eps is the RMSNorm's.
 * Launch: the dv columns of a value head are cut into S slices (S =
 * dv / 32 at most, fewer while ratio S > 8: S = 4 for the 9B shape, 2 for
 * the 27B shape); one block of dk (dv / S) / 32 threads per (value head,
 * slice) holds its [dk, dv / S] slice of the state in registers (read
 * once, written once, 16-byte coalesced); the ratio S blocks of a key head
 * form a thread block cluster (sm_90): each computes the q and k conv of
 * its key head itself, a cluster barrier orders those conv-state reads
 * before the q and k conv-state writes (one block per channel), and the
 * gated RMSNorm's sum of squares meets over the S slices through
 * distributed shared memory. The dk-sums split over 8-row groups that meet
 * in a fixed order (not the twins' single ascending sum); no atomics: the
 * bits depend on dk, dv and S only. dk, dv in {64, 128}, kernel <= 4 and
 * n_v_heads / n_k_heads <= 8, else FRT_ERR_UNSUPPORTED (nothing enqueued);
 * n_v_heads a multiple of n_k_heads. Twins: frt_cpu_conv1d_causal (n_tok
 * 1), frt_cpu_l2norm, frt_cpu_gdn_gate, frt_cpu_gdr_recurrent,
 * frt_cpu_rmsnorm_gated (composed). */
int frt_cuda_gdn_decode(void *stream, void *ob, frt_cuda_dtype ob_dtype, float *state,
                        float *conv_state, float *qkv_out, const void *x, frt_cuda_dtype x_dtype,
                        const float *conv_w, const float *zg, const float *a, const float *b,
                        const float *A_log, const float *dt_bias, const float *norm_w,
                        const int32_t *d_n, int n_k_heads, int n_v_heads, int dk, int dv,
                        int kernel, float eps);

/* ---- elementwise -------------------------------------------------------- */
/* The flat elementwise kernels work on the first n * per_tok elements of
 * buffers of max_n * per_tok elements (n from d_n). */

/* out = silu(gate) * up. gate, up of in_dtype; out of out_dtype (may equal
 * gate or up when the dtypes match). Twin: frt_cpu_swiglu. */
int frt_cuda_swiglu(void *stream, void *out, frt_cuda_dtype out_dtype, const void *gate,
                    const void *up, frt_cuda_dtype in_dtype, const int32_t *d_n, int max_n,
                    int per_tok);

/* SwiGLU of two FP8 GEMM accumulators (frt_cuda_gemm_fp8_run_acc, f32 or
 * bf16: acc_dtype):
 *   g = (gate[t, i] * x_scale[t]) * gate_scale[i];  u = (up[t, i] * x_scale[t]) * up_scale[i]
 *   out[t, i] = bf16(silu(g) * u)
 * with f32 accumulators the bits of frt_cuda_gemm_fp8_run's outputs
 * (epilogue scaling) through frt_cuda_swiglu (f32 in, bf16 out), in one
 * pass; bf16 accumulators are widened exactly first. gate, up [max_n,
 * per_tok] 16-byte aligned (8 for bf16), the scales [per_tok] 16-byte
 * aligned, out [max_n, per_tok] bf16 8-byte aligned, x_scale [max_n];
 * per_tok % 4 == 0. Errors: FRT_ERR_INVALID_ARGUMENT (NULL, dtype, sizes,
 * alignment); FRT_ERR_BACKEND. Twin: the epilogue's products,
 * frt_cpu_swiglu (tests/test_cuda_gemm_fp8.c). */
int frt_cuda_swiglu_fp8acc(void *stream, uint16_t *out, const void *gate, const void *up, frt_cuda_dtype acc_dtype,
                           const float *x_scale, const float *gate_scale, const float *up_scale, const int32_t *d_n,
                           int max_n, int per_tok);

/* y *= sigmoid(gate). Twin: frt_cpu_sigmoid_mul. */
int frt_cuda_sigmoid_mul(void *stream, void *y, frt_cuda_dtype y_dtype, const void *gate,
                         frt_cuda_dtype gate_dtype, const int32_t *d_n, int max_n, int per_tok);

/* out = y * sigmoid(gate): the f32 product of frt_cuda_sigmoid_mul stored
 * as out_dtype (the bits of frt_cuda_sigmoid_mul on an f32 y then
 * frt_cuda_convert), for the first n tokens of [max_n, per_tok] (rows past
 * n untouched); out must not overlap y or gate unless it is y with the same
 * dtype. f32 y and gate into bf16 with per_tok % 4 == 0 and aligned
 * pointers take 4 elements a thread. Errors: FRT_ERR_INVALID_ARGUMENT
 * (NULL, bad dtype, sizes). Twin: frt_cpu_sigmoid_mul, then the bf16
 * rounding of the store. */
int frt_cuda_sigmoid_mul_to(void *stream, void *out, frt_cuda_dtype out_dtype, const void *y, frt_cuda_dtype y_dtype,
                            const void *gate, frt_cuda_dtype gate_dtype, const int32_t *d_n, int max_n, int per_tok);

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
 * any request's settings): the library's frt_sampling (frt/sampling.h),
 * read in place from the step record. */
typedef frt_sampling frt_cuda_sampler_params;

/* Bytes of workspace frt_cuda_sample / frt_cuda_sample_token need for n
 * logits into *bytes (16 n + ~1.1 MiB). Also looks up the cooperative grid
 * size of the current device, so call it at setup, outside a capture.
 * Errors: FRT_ERR_INVALID_ARGUMENT (n < 1 or n > 2^24, NULL);
 * FRT_ERR_UNSUPPORTED (no cooperative launch); FRT_ERR_BACKEND. */
int frt_cuda_sample_workspace_bytes(int n, size_t *bytes);

/* How many sampler launches over n logits fit the device at once (>= 1):
 * the co-resident blocks of the sampler kernel over one launch's grid. A
 * graph that runs several samplers side by side (the batched decode's
 * branches, kernels/cuda/fanout.h) keeps at most this many in flight, so
 * every cooperative grid can be resident whole. Call at setup, outside a
 * capture. Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_UNSUPPORTED (no
 * cooperative launch); FRT_ERR_BACKEND. */
int frt_cuda_sample_concurrency(int n, int *out);

/* Samples one token from logits [n] f32 (device):
 *   u = frt_rng_uniform(d_rng)       (one SplitMix64 step per call, always,
 *                                     whatever the temperature)
 *   *d_token = frt_cpu_sample_minp(logits, n, temperature, top_k, top_p,
 *                                  min_p, u)
 * A min_p > 0 keeps the head tokens with p_i >= min_p (counted with the
 * head, a prefix of the sorted order) before top-k. Parameters with a logit
 * bias or a penalty on write *d_token = -1 (they need the adjusted logits:
 * frt_cuda_sample_step).
 * with the parameters read from *d_params. One cooperative launch (sample.cu:
 * a grid of at most one block per SM, grid-wide barriers): argmax partials;
 * temperature 0 ends there. Otherwise the tokens whose p_i = exp((l_i -
 * l_max) / T) (fp64) is >= 2^-53 (the others cannot change the twin's
 * result) are sorted by (logit desc, index asc) with a stable radix sort
 * (NaN as -inf), top-k keeps a prefix, and nested fixed-order prefix sums
 * give top-p and the draw. The prefix sums are associated differently from
 * the CPU's running sum (a relative difference near 1e-16), so the token can
 * differ from the CPU's only when u falls within that distance of a
 * boundary. Invalid parameters (temperature < 0 or NaN, top_k < 0, top_p not
 * in (0, 1], min_p not in [0, 1]) write *d_token = -1. workspace (device, 256-byte aligned,
 * scratch) of frt_cuda_sample_workspace_bytes(n) bytes; calls on one stream
 * may share it. 1 <= n <= 2^24. Errors: FRT_ERR_INVALID_ARGUMENT;
 * FRT_ERR_UNSUPPORTED (no cooperative launch); FRT_ERR_BACKEND.
 * Twin: frt_cpu_sample. */
int frt_cuda_sample(void *stream, int32_t *d_token, const float *logits, int n,
                    const frt_cuda_sampler_params *d_params, uint64_t *d_rng, void *workspace,
                    size_t workspace_bytes);

/* The decode step's token (task_sample of qwen35_cpu.c): when the
 * temperature in *d_params is <= 0, *d_token = the argmax of frt_cuda_argmax
 * and *d_rng is neither read nor written; otherwise exactly frt_cuda_sample
 * (one RNG step; -1 for invalid parameters, NaN temperature included). The
 * same single launch, workspace and errors as frt_cuda_sample; a greedy step
 * costs one pass over the logits and one grid barrier (no sort).
 * Twin: frt_cpu_argmax / frt_cpu_sample as task_sample uses them. */
int frt_cuda_sample_token(void *stream, int32_t *d_token, const float *logits, int n,
                          const frt_cuda_sampler_params *d_params, uint64_t *d_rng,
                          void *workspace, size_t workspace_bytes);

/* Steps 1-3b of the sampling step (frt/sampling.h: logit bias, repetition
 * penalty, frequency and presence penalties, the allowed-token mask): out
 * [n] f32 = the adjusted logits [n] f32, from *d_params, d_counts [n] i32
 * (times generated) and d_seen [n] u8 (device), then -inf for every token
 * whose bit of d_mask [ceil(n / 32)] u32 is clear when *d_mask_on is
 * nonzero (d_mask_on NULL = no mask; both device, read when the kernel
 * runs). Bit-identical to frt_cpu_logits_adjust + frt_cpu_logits_mask (the
 * shared code of kernels/cpu/sample_rule.h, no FMA contraction). With no
 * bias, no penalty and no mask the kernel returns without touching out.
 * Bias tokens outside [0, n) are skipped (the model API refuses them
 * before). One launch. Errors: FRT_ERR_INVALID_ARGUMENT (NULL, d_mask_on
 * without d_mask, n out of 1..2^24); FRT_ERR_BACKEND. Twin:
 * frt_cpu_logits_adjust, frt_cpu_logits_mask. */
int frt_cuda_logits_adjust(void *stream, float *out, const float *logits, int n,
                           const frt_cuda_sampler_params *d_params, const int32_t *d_counts,
                           const uint8_t *d_seen, const int32_t *d_mask_on, const uint32_t *d_mask);

/* When d_params->logprobs: *d_out = frt_cpu_logprobs of the logits the step
 * sampled from (adj when *d_params adjusts or *d_mask_on (NULL = 0) is
 * nonzero, and adj is not NULL, else logits; [n] f32 device) for the token *d_token and top_logprobs
 * entries; otherwise returns at once. One block (logprobs.cu); the values
 * match the twin to the last bit but for rare f32 roundings of a
 * log-sum-exp associated differently (|d| <= 1e-5 tested). Errors:
 * FRT_ERR_INVALID_ARGUMENT; FRT_ERR_BACKEND. Twin: frt_cpu_logprobs. */
int frt_cuda_logprobs(void *stream, frt_logprobs *d_out, const float *logits, const float *adj, int n,
                      const int32_t *d_token, const frt_cuda_sampler_params *d_params,
                      const int32_t *d_mask_on);

/* The decode step's whole sampling step (frt/sampling.h), three launches on
 * one stream, all parameters from device memory:
 *   frt_cuda_logits_adjust into the workspace (returns at once when off),
 *   with the allowed-token mask d_mask when *d_mask_on (d_mask_on NULL =
 *   never masked),
 *   frt_cuda_sample_token on the adjusted logits when a bias, a penalty or
 *   the mask is on, else on logits (min_p, top-k, top-p, the draw),
 *   frt_cuda_logprobs into *d_logprobs (returns at once when not asked).
 * With every field off the step costs frt_cuda_sample_token plus two
 * launches that read the parameters and return. workspace as
 * frt_cuda_sample_workspace_bytes. Errors as frt_cuda_sample_token.
 * Twin: task_sample of src/model/cpu_forward.c. */
int frt_cuda_sample_step(void *stream, int32_t *d_token, const float *logits, int n,
                         const frt_cuda_sampler_params *d_params, const int32_t *d_counts,
                         const uint8_t *d_seen, const int32_t *d_mask_on, const uint32_t *d_mask,
                         uint64_t *d_rng, frt_logprobs *d_logprobs, void *workspace, size_t workspace_bytes);

/* ---- GEMM (cuBLASLt, and a GEMV for decode) ----------------------------- */

/* A cuBLASLt handle, its plan cache and one workspace per stream.
 *   y[n, out_dim] = x[n, in_dim] . w[out_dim, in_dim]^T   (+ y when accumulate)
 * x, w bf16; y f32 or bf16; fp32 compute (CUBLAS_COMPUTE_32F). The kernel
 * of each shape is chosen once, at setup, by frt_cuda_gemm_plan;
 * frt_cuda_gemm_run only looks the plan up (never a heuristic in the hot
 * path). n is the row count of one graph variant (a prefill bucket or the
 * decode batch): plans are per bucket size. Two kernels:
 *   - n <= FRT_CUDA_GEMV_MAX_N (decode): frt's own bandwidth-bound GEMV
 *     (gemv.cu): x staged in shared memory, warps stream weight rows (or
 *     slices of them) with 16-byte non-allocating loads and accumulate in
 *     fp32; a fixed-order butterfly inside the warp and, when a row is split
 *     over the warps of a block, a fixed order over those warps; no atomics,
 *     no split across blocks. The GEMVs are launched with programmatic
 *     dependent launch (Hopper): a GEMV's first weight loads are in flight
 *     while the kernel before it finishes; FRT_PDL=0 in the environment
 *     launches them plainly. Weights of more than
 *     FRT_CUDA_GEMV_AUTO_MAX_BYTES (8 GiB: larger than any model matrix) stay on cuBLASLt under
 *     FRT_CUDA_GEMV_AUTO (frt_cuda_gemm_set_gemv).
 *   - FRT_CUDA_GEMV_MAX_N < n <= 64 on a handle with frt_cuda_gemm_set_skinny
 *     (off by default; the dense LLMs' append buckets): frt's own skinny
 *     GEMM (gemm_skinny.cu, docs/kernels-cuda.md "The skinny GEMM"):
 *     wgmma over tensor-copied tiles of 256 output columns, each tile's
 *     inner dimension split over a cluster of up to 8 blocks whose partial
 *     sums meet in distributed shared memory, added in rank order; a
 *     programmatic dependent launch; no workspace.
 *   - otherwise cuBLASLt (cublasLtMatmulAlgoGetHeuristic, the top result).
 * Twin: frt_cpu_matmul / frt_cpu_matmul_add. */
typedef struct frt_cuda_gemm frt_cuda_gemm;

/* Largest n the GEMV path takes. */
#define FRT_CUDA_GEMV_MAX_N 8
/* Under FRT_CUDA_GEMV_AUTO, weights larger than this (bytes) use cuBLASLt. */
#define FRT_CUDA_GEMV_AUTO_MAX_BYTES ((size_t)8 << 30)

/* Which plans take the GEMV (frt_cuda_gemm_set_gemv). */
typedef enum frt_cuda_gemv_policy {
    FRT_CUDA_GEMV_AUTO = 0,   /* n <= FRT_CUDA_GEMV_MAX_N and weights <= AUTO_MAX_BYTES (default) */
    FRT_CUDA_GEMV_NEVER = 1,  /* always cuBLASLt */
    FRT_CUDA_GEMV_ALWAYS = 2, /* every n <= FRT_CUDA_GEMV_MAX_N (the LM head too) */
} frt_cuda_gemv_policy;

/* The kernel of a plan. */
typedef enum frt_cuda_gemm_kernel {
    FRT_CUDA_GEMM_CUBLASLT = 0,
    FRT_CUDA_GEMM_GEMV = 1,
    FRT_CUDA_GEMM_SKINNY = 2,
} frt_cuda_gemm_kernel;

/* What a plan's epilogue does after the f32 sum, before the bf16 store
 * (frt_cuda_gemm_plan_epilogue). */
typedef enum frt_cuda_gemm_epilogue {
    FRT_CUDA_GEMM_EPI_NONE = 0,
    FRT_CUDA_GEMM_EPI_BIAS = 1,      /* y = bf16(sum + b) */
    FRT_CUDA_GEMM_EPI_BIAS_GELU = 2, /* y = bf16(gelu_tanh(sum + b)), cuBLASLt's GELU (the tanh form) */
} frt_cuda_gemm_epilogue;

/* One plan, for the model fingerprint: the key and the chosen algorithm.
 * A GEMV plan fills the cuBLASLt fields with its own configuration, so a
 * hash of them changes whenever the GEMV choice does: algo_id -1,
 * tile_id = output rows per block, stages_id = 16-byte weight loads in
 * flight per lane, splitk_num = warps sharing one row (in-block split of
 * in_dim), reduction_scheme 0, cta_swizzling = warps per block,
 * custom_option = the GEMV kernel version; algo_data zero. A skinny plan:
 * algo_id -2, tile_id = tiles of 256 output columns, stages_id = units of
 * 64 inner elements a tile, splitk_num = the blocks a tile's inner
 * dimension is split over (a row's bits depend on it), reduction_scheme /
 * cta_swizzling = the split / tiles of its SwiGLU form
 * (frt_cuda_gemm_swiglu; 0 without one), custom_option = the kernel's
 * version. */
typedef struct frt_cuda_gemm_plan_info {
    int n, in_dim, out_dim;
    frt_cuda_dtype out_dtype;
    int accumulate;
    frt_cuda_gemm_epilogue epilogue; /* FRT_CUDA_GEMM_EPI_NONE but for frt_cuda_gemm_plan_epilogue's plans */
    int algo_id, tile_id, stages_id, splitk_num, reduction_scheme, cta_swizzling, custom_option;
    uint64_t algo_data[8]; /* the raw cublasLtMatmulAlgo_t */
    frt_cuda_gemm_kernel kernel;
    int gemv_rows_per_warp, gemv_blocks; /* GEMV only (0 for cuBLASLt) */
    /* cuBLASLt only (GEMV: -1, 0, 0, 0): the chosen algorithm's rank in the
     * heuristic's list (0 = its first choice), how many results the last
     * frt_cuda_gemm_autotune timed (0: none: the heuristic's first choice, or
     * a choice from frt_cuda_gemm_load), and the mean time of one run of
     * rank 0 and of the chosen one in that autotune (us; 0 untimed). */
    int tune_index, tune_candidates;
    float tune_us_first, tune_us_best;
    int like_n; /* frt_cuda_gemm_plan_like: the rows of the plan whose algorithm this one runs (0: its own) */
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

/* Sets which plans made AFTER this call take the GEMV (plans already made
 * keep their kernel). Errors: FRT_ERR_INVALID_ARGUMENT (NULL, bad policy). */
int frt_cuda_gemm_set_gemv(frt_cuda_gemm *g, frt_cuda_gemv_policy policy);

/* Sets whether plans made AFTER this call with FRT_CUDA_GEMV_MAX_N < n <=
 * 64 take the skinny GEMM (1) or cuBLASLt (0, the default). A shape takes
 * it when out_dim and in_dim are multiples of 8, the device is a Hopper
 * (compute capability 9.x); else cuBLASLt. The split is the largest (up to
 * 8, at most in_dim / 64) whose tiles x split blocks fit the device's
 * multiprocessors in one wave of clusters, so a plan (and its bits) depends
 * on the device model. Skinny plans are left out of autotune, save and
 * load. Errors: FRT_ERR_INVALID_ARGUMENT (NULL, on not 0 or 1). */
int frt_cuda_gemm_set_skinny(frt_cuda_gemm *g, int on);

/* Whether frt_cuda_gemm_swiglu runs for (n, in_dim, out_dim, products):
 * the plan of that shape with out dtype `products`, not accumulating, is
 * skinny. 0 for NULL. */
int frt_cuda_gemm_swiglu_ok(const frt_cuda_gemm *g, int n, int in_dim, int out_dim, frt_cuda_dtype products);

/* y [n, out_dim] bf16 = SwiGLU(x . w_gate^T, x . w_up^T) in one skinny
 * launch: each product summed as the skinny GEMM sums it, rounded to bf16
 * when products is FRT_CUDA_BF16 (kept in f32 for FRT_CUDA_F32), then
 * silu(g) * u in f32 rounded to bf16 (frt_cuda_swiglu's form for gate and
 * up products of that dtype: the dense family's bf16, the hybrid's f32).
 * x [n, in_dim], w_gate / w_up [out_dim, in_dim] bf16; 16-byte aligned
 * device pointers; y must not overlap them. A tile is 128 gate and the
 * same 128 up columns (their own split: the bits of a row are those of
 * this launch's plan, not of two frt_cuda_gemm_run calls). Twin:
 * frt_cpu_matmul twice, then frt_cpu_swiglu. Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL, bad shape or dtype, misaligned);
 * FRT_ERR_UNSUPPORTED (frt_cuda_gemm_swiglu_ok is 0: nothing enqueued);
 * FRT_ERR_BACKEND. */
int frt_cuda_gemm_swiglu(frt_cuda_gemm *g, void *stream, uint16_t *y, const uint16_t *x, const uint16_t *w_gate,
                         const uint16_t *w_up, int n, int in_dim, int out_dim, frt_cuda_dtype products);

/* Chooses and caches the kernel for a shape (a no-op when cached): the GEMV
 * when the policy takes it and x fits the device's shared memory per block
 * (n * in_dim * 2 bytes plus <= 1 KiB: in_dim up to ~28k at n 4, ~14k at n 8), else
 * cuBLASLt. in_dim must be a multiple of 8 (16-byte aligned rows); out_dim
 * too on the cuBLASLt path (n > FRT_CUDA_GEMV_MAX_N, or FRT_CUDA_GEMV_NEVER); any out_dim >= 1
 * on the GEMV path. A GEMV plan reads the current device's shared-memory
 * limit and sets the kernel's attribute (at setup, not inside a capture).
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_UNSUPPORTED (no algorithm);
 * FRT_ERR_OUT_OF_RANGE (more than 1024 plans); FRT_ERR_OUT_OF_MEMORY;
 * FRT_ERR_BACKEND. */
int frt_cuda_gemm_plan(frt_cuda_gemm *g, int n, int in_dim, int out_dim, frt_cuda_dtype out_dtype,
                       int accumulate);

/* Enqueues y = x . w^T (+ y) with the cached plan. x, w, y 16-byte aligned
 * device pointers; y must not overlap x or w. With accumulate, a GEMV plan
 * stores y = fl(sum + y) (y widened to f32, bf16 rounded once): the bits of
 * running it into an f32 delta and then frt_cuda_add(y, delta) (decode's
 * residual add fused into the output projections). A GEMV plan needs no
 * workspace (the stream need not be added). Errors:
 * FRT_ERR_INVALID_ARGUMENT; FRT_ERR_STATE (no plan for the shape, or a
 * workspace is needed and the stream was not added); FRT_ERR_BACKEND. */
int frt_cuda_gemm_run(frt_cuda_gemm *g, void *stream, void *y, frt_cuda_dtype y_dtype,
                      const uint16_t *x, const uint16_t *w, int n, int in_dim, int out_dim,
                      int accumulate);

/* The cuBLASLt plan of y [n, out_dim] bf16 = epi(x . w^T + b) (a no-op
 * when cached): the bias b [out_dim] bf16 added to the f32 sum, then for
 * FRT_CUDA_GEMM_EPI_BIAS_GELU cuBLASLt's GELU (the tanh form, torch's
 * gelu approximate="tanh"), rounded to bf16 once. Replaces a GEMM into f32
 * and frt_cuda_bias_act's launch. Always cuBLASLt (any n: no GEMV or skinny
 * form); out_dim a multiple of 8; made with the heuristic's first choice
 * and left out of frt_cuda_gemm_autotune, frt_cuda_gemm_save and
 * frt_cuda_gemm_load. Its own plan beside a plain one of the same shape.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, bad shape, epi not BIAS or
 * BIAS_GELU); FRT_ERR_UNSUPPORTED (no algorithm); FRT_ERR_OUT_OF_RANGE (more
 * than 1024 plans); FRT_ERR_OUT_OF_MEMORY; FRT_ERR_BACKEND. */
int frt_cuda_gemm_plan_epilogue(frt_cuda_gemm *g, int n, int in_dim, int out_dim, frt_cuda_gemm_epilogue epi);

/* Enqueues y = epi(x . w^T + bias) with the plan of
 * frt_cuda_gemm_plan_epilogue. x [n, in_dim], w [out_dim, in_dim], bias
 * [out_dim], y [n, out_dim], all bf16, 16-byte aligned device pointers; y
 * must not overlap the others. The bias pointer is set on the plan's
 * descriptor for this call: one host thread at a time per handle (as every
 * call on it). With EPI_BIAS, y holds the bits of frt_cuda_gemm_run into
 * f32 followed by frt_cuda_bias_act (no activation) where both sums are
 * the same (the same reduction); GELU's tanh may differ from
 * frt_cuda_bias_act's in the last bit. Twin: frt_cpu_matmul, the bias,
 * frt_cpu_gelu_tanh. Errors: FRT_ERR_INVALID_ARGUMENT (NULL, bad shape or
 * epilogue, misaligned); FRT_ERR_STATE (no plan, or the plan needs a
 * workspace and the stream was not added); FRT_ERR_BACKEND. */
int frt_cuda_gemm_run_epilogue(frt_cuda_gemm *g, void *stream, uint16_t *y, const uint16_t *x, const uint16_t *w,
                               const uint16_t *bias, int n, int in_dim, int out_dim, frt_cuda_gemm_epilogue epi);

/* frt_cuda_gemm_run (the same bits), skipped on the device: every block of
 * the GEMV reads *d_skip (int32, device memory) first and returns when it is
 * nonzero, writing nothing, so one captured launch decides per replay (the
 * prefill LM head runs on a call's last piece only). Needs a GEMV plan (n <=
 * FRT_CUDA_GEMV_MAX_N under the plan's policy). Errors: those of
 * frt_cuda_gemm_run; FRT_ERR_INVALID_ARGUMENT for a NULL d_skip;
 * FRT_ERR_UNSUPPORTED when the shape's plan is cuBLASLt (nothing enqueued). */
int frt_cuda_gemm_run_unless(frt_cuda_gemm *g, void *stream, const int32_t *d_skip, void *y,
                             frt_cuda_dtype y_dtype, const uint16_t *x, const uint16_t *w, int n,
                             int in_dim, int out_dim, int accumulate);

/* ---- row groups (docs/kernels-cuda.md "Prefill groups") -------------------
 * A prefill of several pieces of C rows can run each product once over all
 * of them, provided every row gets the bits it gets in a piece of its own
 * (restore == cold holds whatever grouping a prefill ran with). cuBLASLt
 * picks its algorithm per row count; a row's bits depend on how its dot
 * products are reduced (split-k, the reduction scheme, the MMA's k
 * order), not on the tile shape or the number of tiles: on the H100 with
 * cuBLASLt 13 every non-split-k candidate for 2048 rows gave every row the
 * bits of the 256-row plan at every dense-model shape (docs/PERF.md). That
 * is a property of the algorithms, not a documented guarantee, so a group's
 * plan (frt_cuda_gemm_plan_like) is kept only once frt_cuda_gemm_check_like
 * has compared its rows with the pieces' on the device. */

/* Makes (or re-points) the plan of n rows for the shape of the existing
 * cuBLASLt plan of n_src rows (same in_dim, out_dim, out_dtype,
 * accumulate): with rank -1 that plan's algorithm, with rank >= 0 the
 * heuristic's result of that rank for n rows (0: its first choice); checked
 * with cublasLtMatmulAlgoCheck for n rows. The caller then proves the rows'
 * bits with frt_cuda_gemm_check_like and tries another rank when they
 * differ. Such a plan is left out of frt_cuda_gemm_fingerprint (checked to
 * give the bits of the n_src plan, which is in it) and of autotune, save
 * and load; its plan_info.like_n is n_src and tune_index the rank. Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL, n <= n_src, bad shape or rank);
 * FRT_ERR_STATE (no cuBLASLt plan of n_src rows, or a plan of n rows with
 * its own algorithm exists); FRT_ERR_NOT_FOUND (the heuristic has no result
 * of that rank); FRT_ERR_UNSUPPORTED (the algorithm does not take n rows);
 * FRT_ERR_OUT_OF_RANGE (more than 1024 plans); FRT_ERR_OUT_OF_MEMORY;
 * FRT_ERR_BACKEND. On an error an existing plan of n rows is unchanged. */
int frt_cuda_gemm_plan_like(frt_cuda_gemm *g, int n, int n_src, int in_dim, int out_dim, frt_cuda_dtype out_dtype,
                            int accumulate, int rank);

/* Checks on the device that the plan of n rows gives every row the bits the
 * n_src plan gives it, n a multiple of n_src: x [n, in_dim] bf16 is filled
 * with a fixed pseudo-random pattern in [-1, 1), y [n, out_dim] = x . w^T
 * by the n-row plan, then each piece of n_src rows by the n_src plan into
 * y_ref [n_src, out_dim], compared word for word with its rows of y. *same
 * is 1 when every row matched, else 0. w [out_dim, in_dim] bf16 (a real
 * weight, or any); x, y, y_ref device scratch of those sizes (y, y_ref in
 * out_dtype); with accumulate the accumulating plans, y and each piece's
 * y_ref zeroed first (y = 0 + x . w^T: the epilogue adds y element by
 * element, so a row's bits are those of its dot products). Synchronizes
 * the stream (an added one when a plan
 * needs a workspace). Errors: FRT_ERR_INVALID_ARGUMENT (NULL, n not a
 * multiple of n_src); FRT_ERR_STATE (a plan missing); FRT_ERR_OUT_OF_MEMORY;
 * FRT_ERR_BACKEND. */
int frt_cuda_gemm_check_like(frt_cuda_gemm *g, void *stream, int n, int n_src, int in_dim, int out_dim,
                             int accumulate, frt_cuda_dtype out_dtype, const uint16_t *w, uint16_t *x, void *y,
                             void *y_ref, int *same);

/* Number of cached plans (0 for NULL). */
int frt_cuda_gemm_plan_count(const frt_cuda_gemm *g);

/* The largest n (0 .. FRT_CUDA_GEMV_MAX_N) such that every cached plan of
 * at most n rows takes the GEMV: the row groups a batched decode may use
 * and stay batch-invariant (a plan falls back to cuBLASLt where x [n,
 * in_dim] does not fit a block's shared memory, e.g. a 17408-wide
 * down_proj at n 8). 0 for NULL. */
int frt_cuda_gemm_gemv_rows(const frt_cuda_gemm *g);

/* Plan i (in the order they were made) into *info.
 * Errors: FRT_ERR_INVALID_ARGUMENT; FRT_ERR_OUT_OF_RANGE. */
int frt_cuda_gemm_plan_get(const frt_cuda_gemm *g, int i, frt_cuda_gemm_plan_info *info);

/* ---- GEMM autotune (docs/kernels-cuda.md) --------------------------------
 * By default each cuBLASLt plan runs the heuristic's first choice. Autotune
 * times up to N of the heuristic's ranked results per plan and keeps the
 * fastest; the choice (its rank and its config ids) is saved to a small text
 * file (kernels/gemm_tune.h) so a later load reuses it without timing:
 * outputs then never depend on a timing taken at that load. A choice
 * changes frt_cuda_gemm_fingerprint (the algorithm ids are in it). GEMV
 * plans are not tuned. Setup-time calls: never inside a stream capture. */

/* Times up to n_candidates (1..FRT_GEMM_TUNE_MAX_CANDIDATES = 64) of the
 * heuristic's results for every cuBLASLt plan without an epilogue (those
 * of frt_cuda_gemm_plan_epilogue keep the first choice) on `stream` (an added stream:
 * its workspace bounds the candidates; those needing more are skipped) and
 * keeps the fastest (mean of 20 runs after 3 warm-up runs on random bf16
 * operands; a tie keeps the better-ranked). n_candidates 0 puts every plan
 * back on the heuristic's first choice without timing (the default
 * behaviour). Synchronises the stream. Scratch operands of the largest plan
 * are allocated and freed here. Errors: FRT_ERR_INVALID_ARGUMENT (NULL g,
 * n_candidates out of range); FRT_ERR_STATE (the stream is capturing, or
 * was not added while the handle has a workspace, or the handle has plans
 * made by frt_cuda_gemm_plan_like); FRT_ERR_UNSUPPORTED (no
 * candidate of a plan ran); FRT_ERR_OUT_OF_MEMORY; FRT_ERR_BACKEND. On an
 * error the plans tuned before the failing one keep their new choice. */
int frt_cuda_gemm_autotune(frt_cuda_gemm *g, int n_candidates, void *stream);

/* The heuristic's ranked results for plan i (cuBLASLt only): up to max of
 * them into ids[k][0..7) (algo id, tile, stages, split-k, reduction,
 * swizzle, custom option, as in frt_cuda_gemm_plan_info), *found set to how
 * many. Errors: FRT_ERR_INVALID_ARGUMENT (NULL, max outside 1..64, a GEMV
 * plan); FRT_ERR_OUT_OF_RANGE (i); FRT_ERR_BACKEND. */
int frt_cuda_gemm_candidates(const frt_cuda_gemm *g, int i, int max, int (*ids)[7], int *found);

/* Writes every cuBLASLt plan's choice (shape, rank, config ids; not the
 * epilogue plans, which keep the heuristic's first choice) with the
 * current device's name, cublasLtGetVersion() and the workspace size to
 * path (kernels/gemm_tune.h format; temporary name + rename). Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL); FRT_ERR_IO; FRT_ERR_BACKEND. */
int frt_cuda_gemm_save(const frt_cuda_gemm *g, const char *path);

/* Reads path and gives each listed shape its saved choice: the plan is made
 * when absent (frt_cuda_gemm_plan), the heuristic's result at the saved rank
 * is taken and its config ids must equal the saved ones. Nothing is timed.
 * Plans the file does not list keep their choice. Checked before any choice
 * changes (on error no plan's algorithm changes; plans made by this call
 * stay, at the heuristic's first choice): FRT_ERR_INVALID_ARGUMENT (NULL);
 * FRT_ERR_NOT_FOUND / FRT_ERR_IO (the file); FRT_ERR_FORMAT (malformed, the
 * message names the line); FRT_ERR_STATE (tuned on another device name,
 * cuBLASLt version or workspace size, a listed shape that plans to the
 * GEMV, or a saved rank whose algorithm is not the heuristic's result at
 * that rank any more: re-run frt_cuda_gemm_autotune; or the handle has
 * plans made by frt_cuda_gemm_plan_like); the errors of
 * frt_cuda_gemm_plan. */
int frt_cuda_gemm_load(frt_cuda_gemm *g, const char *path);

/* The load-time hook of a model backend, after its frt_cuda_gemm_plan
 * calls and before any capture (frt_model_params.gemm_autotune and
 * gemm_tune_file as they are): n_candidates 0 does nothing (the
 * heuristic's first choices); otherwise, with path NULL,
 * frt_cuda_gemm_autotune(n_candidates) and nothing saved (*tuned 1); else
 * frt_cuda_gemm_load(path) when the file exists (*tuned 0: nothing timed,
 * the outputs are the saved choice's), else frt_cuda_gemm_autotune and
 * frt_cuda_gemm_save(path) (*tuned 1). tuned may be NULL. Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL g); those of the three calls (a file that
 * exists but does not load is returned, not overwritten). */
int frt_cuda_gemm_autotune_file(frt_cuda_gemm *g, const char *path, int n_candidates, void *stream, int *tuned);

/* xxh64 of every plan's choices (shape, algorithm, tile, stages, split-k,
 * reduction, swizzle, custom option), in plan order: a model folds it into
 * its fingerprint, since another plan is other arithmetic. 0 for NULL. */
uint64_t frt_cuda_gemm_fingerprint(const frt_cuda_gemm *g);

/* ---- fused decode GEMVs (one launch; no handle, no plan) ---------------- */
/* The GEMV of frt_cuda_gemm_run for n <= FRT_CUDA_GEMV_MAX_N, several
 * products per launch (decode runs ~840 kernels per token: each launch saved
 * is ~2 us). The launch configuration is computed on each call from the
 * shapes only (integer arithmetic, no heuristic, no device query up to 48 KiB
 * of x), so the launchers are legal inside a stream capture and never
 * synchronise. Each output row is summed in the same order as
 * frt_cuda_gemm_run's GEMV plan of the same (n, in_dim, out_dim) sums it:
 * the results are the same bits (and the same run to run). Common
 * requirements: x [n, in_dim] bf16 (device, 16-byte aligned), 1 <= n <=
 * FRT_CUDA_GEMV_MAX_N, in_dim a positive multiple of 8, x small enough for
 * the shared memory of one block (n * in_dim * 2 bytes plus <= 512: in_dim
 * up to ~28k at n 4, ~14k at n 8 on an H100/H200); weights bf16 [rows, in_dim] row-major,
 * 16-byte aligned; outputs aligned to their dtype and overlapping no input
 * and no other output. Errors: FRT_ERR_INVALID_ARGUMENT (any of the above
 * violated, checked before anything is enqueued; x over 48 KiB needs a
 * current device to check); FRT_ERR_BACKEND. */

/* The E4M3 decode GEMVs (gemv_fp8.h) are persistent launches where x
 * leaves room beside it in shared memory for the cross-warp sums (not n 8
 * at in 14336, for one); the bf16 ones (frt_cuda_gemm_run's GEMV plans,
 * the fused launchers below) are not (docs/kernels-cuda.md "Persistent
 * launches" says why). A launch's blocks of work (its
 * configuration, a function of n, in_dim and out_dim) are taken by as many
 * blocks as the device holds at once, each doing every grid-th one with x
 * staged once (docs/kernels-cuda.md "Persistent launches"). This caps that
 * grid at `blocks` (<= 0: no cap) for the E4M3 launches enqueued after it
 * (the bf16 ones do not read it): for the tests that check the bits do not
 * depend on the grid. Process-wide; not thread-safe against concurrent
 * launches. */
void frt_cuda_gemv_set_max_grid(int blocks);

/* Most products one frt_cuda_gemv_multi call takes. */
#define FRT_CUDA_GEMV_MULTI_MAX 4

/* One product of frt_cuda_gemv_multi: y [n, out_dim] (y_dtype; bf16 rounds
 * to nearest even once) = x . w^T, w [out_dim, in_dim] bf16 (device; may
 * point into a larger matrix, e.g. rows 32.. of the fused in_proj_b|a). */
typedef struct frt_cuda_gemv_entry {
    void *y;
    frt_cuda_dtype y_dtype;
    const uint16_t *w;
    int out_dim; /* >= 1 */
} frt_cuda_gemv_entry;

/* y_i = x . w_i^T for the n_entries (1 .. FRT_CUDA_GEMV_MULTI_MAX) entries,
 * all of one x [n, in_dim] bf16, in one launch: the blocks of the entries'
 * GEMVs laid end to end (a prefix sum of their block counts, computed on the
 * host). Used for q_proj | k_proj | v_proj and in_proj_qkv | in_proj_z |
 * in_proj_b | in_proj_a. No accumulate form. Errors (see above) also for a
 * NULL `entries`, a bad n_entries, two entries with the same y.
 * Twin: frt_cpu_matmul per entry. */
int frt_cuda_gemv_multi(void *stream, const frt_cuda_gemv_entry *entries, int n_entries,
                        const uint16_t *x, int n, int in_dim);

/* The SwiGLU MLP's first half in one launch (Qwen3_5MLP: act_fn(gate_proj(x))
 * * up_proj(x), act_fn = silu):
 *   y[t, i] = silu(g) * u,  g = x[t] . w_gate[i],  u = x[t] . w_up[i]
 * with silu(g) = g / (1 + expf(-g)) as frt_cuda_swiglu; g and u in fp32
 * (never stored), the product rounded once to y_dtype. x [n, in_dim] bf16;
 * w_gate, w_up [inter, in_dim] bf16; y [n, inter] of y_dtype (bf16 for the
 * down_proj's input). The same warps stream row i of both weights. Bits:
 * those of frt_cuda_gemm_run (f32 out) for gate and up, then frt_cuda_swiglu.
 * Twin: frt_cpu_matmul (gate), frt_cpu_matmul (up), frt_cpu_swiglu, all f32. */
int frt_cuda_gemv_swiglu(void *stream, void *y, frt_cuda_dtype y_dtype, const uint16_t *x,
                         const uint16_t *w_gate, const uint16_t *w_up, int n, int in_dim,
                         int inter);

/* The RMSNorm that frt_cuda_gemv_multi_norm / frt_cuda_gemv_swiglu_norm
 * apply to their input (the layer's input_layernorm / post_attention_layernorm
 * folded into the GEMV that consumes it):
 *   x[t, :] = bf16(rmsnorm(resid[t, :]))   t < n, as frt_cuda_rmsnorm:
 *   resid * rsqrt(mean(resid^2) + eps) * (zero_centered ? 1 + w : w)
 * The struct is read on the host during the call (it may live on the stack);
 * x and w are device pointers. */
typedef struct frt_cuda_gemv_norm {
    const float *x;    /* [n, in_dim] f32, the residual stream (16-byte aligned) */
    const float *w;    /* [in_dim] f32, the norm weight (16-byte aligned) */
    float eps;
    int zero_centered; /* Qwen3.5: 1 (x * rstd * (1 + w)) */
} frt_cuda_gemv_norm;

/* frt_cuda_gemv_multi of x = bf16(rmsnorm(norm->x, norm->w)) [n, in_dim],
 * the norm computed by every block of the launch into its shared-memory x
 * (no separate norm launch, no bf16 x in global memory). The norm is
 * frt_cuda_rmsnorm's arithmetic, operation for operation (the fp64 sum of
 * squares in the order of its launch for in_dim, then the same fp32 ops,
 * RNE to bf16), so the outputs are the same bits as frt_cuda_rmsnorm(bf16
 * out, n rows) followed by frt_cuda_gemv_multi. All n rows are normalised
 * (no d_n: decode's n is fixed). The common requirements above apply, with
 * norm->x and norm->w in place of x; no entry's y may equal norm->x or
 * norm->w. Errors: those of frt_cuda_gemv_multi, and
 * FRT_ERR_INVALID_ARGUMENT for a NULL norm, NULL or misaligned norm->x /
 * norm->w. Twin: frt_cpu_rmsnorm (rounded to bf16), then frt_cpu_matmul per
 * entry. */
int frt_cuda_gemv_multi_norm(void *stream, const frt_cuda_gemv_entry *entries, int n_entries,
                             const frt_cuda_gemv_norm *norm, int n, int in_dim);

/* frt_cuda_gemv_swiglu of x = bf16(rmsnorm(norm->x, norm->w)), computed per
 * block as in frt_cuda_gemv_multi_norm: the same bits as frt_cuda_rmsnorm
 * (bf16 out) followed by frt_cuda_gemv_swiglu. y may not equal norm->x or
 * norm->w. Errors: those of frt_cuda_gemv_swiglu, and
 * FRT_ERR_INVALID_ARGUMENT for a NULL norm, NULL or misaligned norm->x /
 * norm->w. Twin: frt_cpu_rmsnorm (rounded to bf16), frt_cpu_matmul x2,
 * frt_cpu_swiglu. */
int frt_cuda_gemv_swiglu_norm(void *stream, void *y, frt_cuda_dtype y_dtype,
                              const frt_cuda_gemv_norm *norm, const uint16_t *w_gate,
                              const uint16_t *w_up, int n, int in_dim, int inter);

/* ---- FP8 E4M3 (fp8.cu) --------------------------------------------------- */

/* q[r, i] = e4m3_satfinite(x[r, i] * (1 / scale[r % n_scales])), r < rows,
 * i < dim. x [rows, dim] f32, q [rows, dim] E4M3 codes (u8), scale
 * [n_scales] f32 > 0, all device memory. Bit-exact twin:
 * frt_fp8_quantize_rows (kernels/cpu/fp8.h: the rounding, saturation and
 * NaN rules, and the scale conventions). FRT_ERR_INVALID_ARGUMENT: NULL
 * pointer, n_scales < 1, rows < 0, dim < 1. */
int frt_cuda_fp8_quantize_rows(void *stream, uint8_t *q, const float *x, const float *scale, int n_scales,
                               int rows, int dim);

/* x[r, i] = decode(q[r, i]) * scale[r % n_scales]; the inverse, shapes and
 * errors as above. Bit-exact twin: frt_fp8_dequantize_rows. */
int frt_cuda_fp8_dequantize_rows(void *stream, float *x, const uint8_t *q, const float *scale, int n_scales,
                                 int rows, int dim);

/* Per-token dynamic quantization (the activations of the FP8 prefill GEMM,
 * docs/fp8.md): for each row r < rows, scale[r] = max|x[r, :]| / 448 (1
 * for a zero row, at least FLT_MIN; NaN skipped; the rules of
 * frt_fp8_amax_scale) and q[r, i] = e4m3_satfinite(x[r, i] * (1 /
 * scale[r])). A row's codes and scale depend on that row only. x [rows,
 * dim] bf16, q [rows, dim] E4M3 codes, scale [rows] f32, device memory; x
 * and q 16-byte aligned, scale 4-byte aligned, dim a positive multiple of
 * 8. Bit-exact twin: frt_fp8_quantize_rows_dynamic on x widened to f32
 * (kernels/cpu/fp8.h). No allocation: legal inside a stream capture.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL pointer, rows < 0, bad dim,
 * misalignment), FRT_ERR_BACKEND (launch). */
int frt_cuda_fp8_quantize_rows_dynamic(void *stream, uint8_t *q, float *scale, const uint16_t *x, int rows,
                                       int dim);

/* frt_cuda_swiglu_fp8acc over rows r < rows of the FP8 accumulators gate,
 * up [rows, dim] (f32 or bf16: acc_dtype) followed by frt_cuda_fp8_quantize_rows_dynamic of
 * its bf16 output, in one launch (a block a row, the bf16 row staged in
 * shared memory, never written to global memory): q [rows, dim] E4M3 and
 * q_scale [rows] get the bits of those two calls. x_scale [rows], the
 * scales [dim] f32; gate, up, the scales and q 16-byte aligned; dim a
 * multiple of 8, at most 49152; q_scale may be x_scale (a row reads its
 * x_scale before it writes its q_scale). The FP8 prefill's MLP: the codes
 * are the down projection's input. Errors: FRT_ERR_INVALID_ARGUMENT (NULL, sizes,
 * alignment); FRT_ERR_BACKEND. Twin: the two calls
 * (tests/test_cuda_gemm_fp8.c). */
int frt_cuda_swiglu_fp8acc_quantize(void *stream, uint8_t *q, float *q_scale, const void *gate, const void *up,
                                    frt_cuda_dtype acc_dtype, const float *x_scale, const float *gate_scale,
                                    const float *up_scale, int rows, int dim);

/* A weight with 128 x 128 block scales as bf16, the operand of the prefill
 * GEMM for block-wise FP8 checkpoints (docs/fp8.md "FP8 weights"):
 * out[r, c] = bf16_rn(decode(q[r, c]) * scale[r / 128][c / 128]) (the f32
 * product __fmul_rn, then RNE to bf16). q [rows, dim] E4M3 codes, scale
 * [ceil(rows / 128), ceil(dim / 128)] f32 row-major, out [rows, dim] bf16,
 * device memory; q and out 16-byte aligned, scale 4-byte, dim a positive
 * multiple of 16. Bit-exact twin: frt_fp8_dequantize_b128_bf16
 * (kernels/cpu/fp8.h). No allocation: legal inside a stream capture.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL pointer, rows < 0, bad dim,
 * misalignment), FRT_ERR_BACKEND (launch). */
int frt_cuda_fp8_dequantize_b128_bf16(void *stream, uint16_t *out, const uint8_t *q, const float *scale, int rows,
                                      int dim);

#ifdef __cplusplus
}
#endif
#endif /* FRT_KERNELS_CUDA_H */
