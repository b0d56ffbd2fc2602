/*
 * arch/dense/dense_glue.h - the small CUDA kernels the dense forward pass
 * needs beyond kernels/cuda (dense_glue.cu): a Linear's bias, RoPE from a
 * table of inverse frequencies (the llama3 table cannot be computed from
 * theta alone, which is what frt_cuda_rope takes), and decode's RoPE + KV
 * append in one launch (bf16 or FP8 E4M3 cache; one sequence or the branch
 * slots of the batched decode). Additive: nothing in kernels/cuda
 * changes.
 *
 * Conventions as kernels/cuda/kernels_cuda.h: `stream` is a cudaStream_t as
 * void *; launchers only enqueue (legal inside a capture) and return 0,
 * FRT_ERR_INVALID_ARGUMENT (nothing enqueued) or FRT_ERR_BACKEND (launch
 * failed); d_n (device int32) NULL means max_n, the count clamped to
 * [0, max_n]; rows t >= n are never touched.
 * Tested against their CPU twins on random data in tests/test_cuda_dense.c.
 */
#ifndef FRT_MODEL_ARCH_DENSE_GLUE_H
#define FRT_MODEL_ARCH_DENSE_GLUE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[t, :] += b for t < n. y [max_n, dim] f32, b [dim] f32 (device).
 * Twin: the add_bias loop of dense_cpu.c (frt_cpu_add per row). */
int frt_dense_bias_add(void *stream, float *y, const float *b, const int32_t *d_n, int max_n, int dim);

/* Rotary embedding, rotate-half, on the whole head of x [max_n, n_heads,
 * head_dim] f32 in place; token t at position *d_start + t; angle
 * a = (float)pos * inv_freq[i] (fp32), CUDA's accurate cosf / sinf.
 * inv_freq [head_dim / 2] f32 (device). head_dim even, 2..1024.
 * Twin: frt_cpu_rope_freqs (kernels/cpu/rope_freqs.h) with pos[t] = start + t. */
int frt_dense_rope_table(void *stream, float *x, const float *inv_freq, const int32_t *d_start,
                         const int32_t *d_n, int max_n, int n_heads, int head_dim);

/* The q, k and v biases of a layer (qwen2's attention bias), [n_heads *
 * head_dim], [n_kv_heads * head_dim] x 2 f32 (device), for the decode
 * preps below: each element x of q, k, v is first x + b (the f32 sum
 * frt_dense_bias_add stores), so one launch replaces three more. A NULL
 * frt_dense_qkv_bias pointer: no bias; one with a NULL member is refused
 * (FRT_ERR_INVALID_ARGUMENT). */
typedef struct frt_dense_qkv_bias {
    const float *q, *k, *v;
} frt_dense_qkv_bias;

/* A decode token's RoPE and KV append in one launch (one thread a q pair,
 * a k pair (roped, then stored) or a V element; no barrier): q
 * [n_heads, head_dim] and k [n_kv_heads, head_dim] f32 roped in place as
 * frt_dense_rope_table at pos = *d_start (one token), then k_cache[pos] =
 * bf16(k) and v_cache[pos] = bf16(v) as frt_cuda_kv_append (nothing when
 * pos >= max_seq); caches [max_seq, n_kv_heads, head_dim] bf16; with bias
 * (NULL: none) q, k and v plus their biases first. The bits of those three
 * launches (with bias: of three frt_dense_bias_add before them), and of
 * frt_dense_decode_prep_batch's branch (the same device code;
 * tests/test_cuda_dense.c). Errors: FRT_ERR_INVALID_ARGUMENT (NULL, sizes,
 * a NULL bias member); FRT_ERR_BACKEND. */
int frt_dense_decode_prep(void *stream, float *q, float *k, const float *v, const float *inv_freq, uint16_t *k_cache,
                          uint16_t *v_cache, const int32_t *d_start, int max_seq, int n_heads, int n_kv_heads,
                          int head_dim, const frt_dense_qkv_bias *bias);

/* A prefill's RoPE and KV append in one launch: row t < n (n from d_n,
 * max_n rows) at pos = *d_start + t, its q [max_n, n_heads, head_dim] and k
 * [max_n, n_kv_heads, head_dim] f32 roped in place as frt_dense_rope_table
 * and its K and V rows stored into the caches as frt_cuda_kv_append (bf16)
 * / frt_cuda_kv_append_fp8 (E4M3 with the per-head scales, _fp8): the bits
 * of those three launches (frt_dense_decode_prep's work on each row;
 * tests/test_cuda_dense.c). max_n <= 65535. q16 NULL: q roped in place
 * (f32); else q [max_n, n_heads, head_dim] bf16 (device, not overlapping
 * q) gets row t's roped q rounded to bf16 (RNE: what the FlashAttention
 * kernels round an f32 q to as they stage it, so the attention's bits are
 * the same from either) and q is not written. Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL, sizes, q16 overlapping q);
 * FRT_ERR_BACKEND. */
int frt_dense_prefill_prep(void *stream, float *q, float *k, const float *v, const float *inv_freq, uint16_t *k_cache,
                           uint16_t *v_cache, const int32_t *d_start, const int32_t *d_n, int max_n, int max_seq,
                           int n_heads, int n_kv_heads, int head_dim, uint16_t *q16);
int frt_dense_prefill_prep_fp8(void *stream, float *q, float *k, const float *v, const float *inv_freq,
                               uint8_t *k_cache, uint8_t *v_cache, const float *k_scale, const float *v_scale,
                               const int32_t *d_start, const int32_t *d_n, int max_n, int max_seq, int n_heads,
                               int n_kv_heads, int head_dim, uint16_t *q16);

/* frt_dense_prefill_prep{,_fp8} over the output of one q | k | v GEMM:
 * qkv [max_n, ld] f32, row t = q (n_heads * head_dim) | k (n_kv_heads *
 * head_dim) | v (n_kv_heads * head_dim) | ld - those unused; row t's q is
 * roped into q_out [max_n, n_heads * head_dim] f32 (the attention's
 * input), or with q_out NULL into q16 (bf16, as frt_dense_prefill_prep's
 * q16), its k roped in place, then K and V stored as there. The bits of
 * frt_dense_prefill_prep on the same rows apart (tests/test_cuda_dense.c).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, sizes, ld < the three widths,
 * both or neither of q_out and q16, either overlapping qkv's max_n rows);
 * FRT_ERR_BACKEND. */
int frt_dense_prefill_prep_packed(void *stream, float *qkv, int ld, float *q_out, const float *inv_freq,
                                  uint16_t *k_cache, uint16_t *v_cache, const int32_t *d_start, const int32_t *d_n,
                                  int max_n, int max_seq, int n_heads, int n_kv_heads, int head_dim, uint16_t *q16);
int frt_dense_prefill_prep_packed_fp8(void *stream, float *qkv, int ld, float *q_out, const float *inv_freq,
                                      uint8_t *k_cache, uint8_t *v_cache, const float *k_scale, const float *v_scale,
                                      const int32_t *d_start, const int32_t *d_n, int max_n, int max_seq,
                                      int n_heads, int n_kv_heads, int head_dim, uint16_t *q16);

/* qwen3's decode prep: frt_dense_decode_prep (no bias) after the per-head
 * RMSNorm of q and k (q_norm, k_norm [head_dim] f32, device: x * rsqrt(
 * mean(x^2) + eps) * w, frt_cuda_rmsnorm's arithmetic with the fp64 sum
 * over a warp), one launch for three. head_dim 64, 128 or 256, else
 * FRT_ERR_UNSUPPORTED. Within 1e-6 of frt_cuda_rmsnorm x 2 +
 * frt_dense_decode_prep (the fp64 sum in another order;
 * tests/test_cuda_dense.c). Errors: FRT_ERR_INVALID_ARGUMENT (NULL,
 * sizes); FRT_ERR_UNSUPPORTED; FRT_ERR_BACKEND. */
int frt_dense_decode_prep_norm(void *stream, float *q, float *k, const float *v, const float *q_norm,
                               const float *k_norm, float eps, const float *inv_freq, uint16_t *k_cache,
                               uint16_t *v_cache, const int32_t *d_start, int max_seq, int n_heads, int n_kv_heads,
                               int head_dim);

/* frt_dense_prefill_prep_packed with qwen3's q / k RMSNorm
 * before RoPE, as frt_dense_decode_prep_norm on each row. Errors: those of
 * frt_dense_prefill_prep_packed, and FRT_ERR_UNSUPPORTED (head_dim not 64,
 * 128 or 256). */
int frt_dense_prefill_prep_packed_norm(void *stream, float *qkv, int ld, float *q_out, const float *q_norm,
                                       const float *k_norm, float eps, const float *inv_freq, uint16_t *k_cache,
                                       uint16_t *v_cache, const int32_t *d_start, const int32_t *d_n, int max_n,
                                       int max_seq, int n_heads, int n_kv_heads, int head_dim);

/* The norm preps above over FP8 E4M3 caches: the K and V stores of
 * frt_dense_decode_prep_fp8 / frt_dense_prefill_prep_packed_fp8 (k_scale,
 * v_scale [n_kv_heads] f32, device). Errors as the bf16 forms. */
int frt_dense_decode_prep_norm_fp8(void *stream, float *q, float *k, const float *v, const float *q_norm,
                                   const float *k_norm, float eps, const float *inv_freq, uint8_t *k_cache,
                                   uint8_t *v_cache, const float *k_scale, const float *v_scale,
                                   const int32_t *d_start, int max_seq, int n_heads, int n_kv_heads, int head_dim);
int frt_dense_prefill_prep_packed_norm_fp8(void *stream, float *qkv, int ld, float *q_out, const float *q_norm,
                                           const float *k_norm, float eps, const float *inv_freq, uint8_t *k_cache,
                                           uint8_t *v_cache, const float *k_scale, const float *v_scale,
                                           const int32_t *d_start, const int32_t *d_n, int max_n, int max_seq,
                                           int n_heads, int n_kv_heads, int head_dim);

/* frt_dense_decode_prep_norm{,_fp8} for the branches of the batched decode
 * (frt_dense_decode_prep_batch's tables and layout; the same device code
 * per branch, so each branch gets the bits of the one-sequence prep:
 * tests/test_cuda_dense.c). Errors as frt_dense_decode_prep_norm. */
int frt_dense_decode_prep_norm_batch(void *stream, float *q, float *k, const float *v, const float *q_norm,
                                     const float *k_norm, float eps, const float *inv_freq,
                                     uint16_t *const *d_k_caches, uint16_t *const *d_v_caches,
                                     const int32_t *const *d_starts, int n_branches, int max_seq, int n_heads,
                                     int n_kv_heads, int head_dim);
int frt_dense_decode_prep_norm_batch_fp8(void *stream, float *q, float *k, const float *v, const float *q_norm,
                                         const float *k_norm, float eps, const float *inv_freq,
                                         uint8_t *const *d_k_caches, uint8_t *const *d_v_caches,
                                         const float *k_scale, const float *v_scale, const int32_t *const *d_starts,
                                         int n_branches, int max_seq, int n_heads, int n_kv_heads, int head_dim);

/* The batched decode's RoPE and KV append (frt/branch.h): for branch b <
 * n_branches at position pos = *d_starts[b]: q[b] [n_heads, head_dim] and
 * k[b] [n_kv_heads, head_dim] f32 roped in place as frt_dense_rope_table
 * (start pos, one token), then d_k_caches[b][pos] = bf16(k[b]) and
 * d_v_caches[b][pos] = bf16(v[b]) as frt_cuda_kv_append (nothing when pos
 * >= max_seq). d_k_caches, d_v_caches, d_starts: device arrays of
 * n_branches device pointers; caches [max_seq, n_kv_heads, head_dim] bf16.
 * Blocks along x per branch as frt_dense_decode_prep, y = the branch. Twin: frt_dense_rope_table (q, k) + frt_cuda_kv_append
 * per branch, the same bits (tests/test_cuda_dense.c). bias: every branch's
 * q, k, v plus the layer's biases first, as frt_dense_decode_prep. */
int frt_dense_decode_prep_batch(void *stream, float *q, float *k, const float *v, const float *inv_freq,
                                uint16_t *const *d_k_caches, uint16_t *const *d_v_caches,
                                const int32_t *const *d_starts, int n_branches, int max_seq, int n_heads,
                                int n_kv_heads, int head_dim, const frt_dense_qkv_bias *bias);

/* frt_dense_decode_prep over an FP8 E4M3 KV cache (docs/fp8.md "The FP8
 * KV cache"): the same RoPE of q and k, then k_cache[pos] =
 * e4m3(k / k_scale[head]) and v_cache[pos] = e4m3(v / v_scale[head]) as
 * frt_cuda_kv_append_fp8 (satfinite RNE of x * __frcp_rn(scale), the CPU
 * codec's bits; nothing when pos >= max_seq). caches [max_seq, n_kv_heads,
 * head_dim] E4M3 codes; k_scale, v_scale [n_kv_heads] f32 > 0 (device).
 * The bits of frt_dense_rope_table (q, k) + frt_cuda_kv_append_fp8, in one
 * launch instead of three, and of frt_dense_decode_prep_batch_fp8's branch
 * (tests/test_cuda_dense.c). Errors: FRT_ERR_INVALID_ARGUMENT (NULL,
 * sizes); FRT_ERR_BACKEND. */
int frt_dense_decode_prep_fp8(void *stream, float *q, float *k, const float *v, const float *inv_freq,
                              uint8_t *k_cache, uint8_t *v_cache, const float *k_scale, const float *v_scale,
                              const int32_t *d_start, int max_seq, int n_heads, int n_kv_heads, int head_dim,
                              const frt_dense_qkv_bias *bias);

/* frt_dense_decode_prep_batch over FP8 E4M3 caches: branch b as
 * frt_dense_decode_prep_fp8 on d_k_caches[b], d_v_caches[b] at *d_starts[b]
 * (device arrays of n_branches device pointers), every branch with the same
 * k_scale, v_scale [n_kv_heads] (the layer's). Twin: frt_dense_rope_table
 * (q, k) + frt_cuda_kv_append_fp8 per branch, the same bits
 * (tests/test_cuda_dense.c). Errors as frt_dense_decode_prep_batch. */
int frt_dense_decode_prep_batch_fp8(void *stream, float *q, float *k, const float *v, const float *inv_freq,
                                    uint8_t *const *d_k_caches, uint8_t *const *d_v_caches, const float *k_scale,
                                    const float *v_scale, const int32_t *const *d_starts, int n_branches, int max_seq,
                                    int n_heads, int n_kv_heads, int head_dim, const frt_dense_qkv_bias *bias);

#ifdef __cplusplus
}
#endif
#endif
