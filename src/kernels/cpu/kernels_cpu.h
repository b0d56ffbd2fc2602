/*
 * kernels/cpu/kernels_cpu.h - the CPU kernels of frt: the compute of the
 * reference CPU backend for the Qwen3.5 hybrid model (Gated DeltaNet linear
 * attention + gated full attention). One op per file in src/kernels/cpu/.
 *
 * Conventions (every function below):
 *   - fp32 in and out, row-major, contiguous (a row stride is named where one
 *     is taken). Sizes are ints >= 0; a size of 0 is a no-op.
 *   - Arguments are validated by the caller (the model layer, which knows the
 *     shapes from the config), except where a function returns a status.
 *   - Deterministic: the same inputs give the same bits, whatever the OpenMP
 *     thread count. Work is split across threads over independent rows or
 *     heads only; every reduction runs in one fixed order inside one thread.
 *     (frt_cpu_matmul goes through OpenBLAS: see there.)
 *   - Output pointers may alias an input only where a function says so.
 *
 * The math follows Hugging Face transformers 5.x
 * src/transformers/models/qwen3_5/modeling_qwen3_5.py (Qwen3-Next's modeling
 * file is the same math); each declaration names the function it follows.
 * docs/kernels.md lists each kernel with its math source and the tolerance
 * it is tested to (tests/test_kernel_*.c, against naive fp64 references).
 */
#ifndef FRT_KERNELS_CPU_H
#define FRT_KERNELS_CPU_H

#include "frt/sampling.h"

#include <stddef.h>
#include <stdint.h>

/* ---- normalisation ------------------------------------------------------ */

/* RMSNorm over the last dimension.
 *   out[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * (zero_centered ? 1 + w : w)
 * x, out [rows, dim] f32; w [dim] f32. out may equal x (in place).
 * Source: Qwen3_5RMSNorm (zero_centered = 1: the layer norms, the final norm,
 * q_norm and k_norm of Qwen3.5 all use `output * (1.0 + weight.float())`);
 * zero_centered = 0 is the Llama/Qwen3 form `x * w`. The mean of squares is
 * accumulated in double and rounded to fp32 (torch reduces fp32 in a cascade,
 * close to the exact sum); everything after it is fp32 in HF's order:
 * (x * rsqrt(var + eps)) * (1 + w). */
void frt_cpu_rmsnorm(float *out, const float *x, const float *w, int rows, int dim, float eps,
                     int zero_centered);

/* Gated RMSNorm, the Gated DeltaNet output norm.
 *   out[r, :] = w * (x[r, :] * rsqrt(mean(x[r, :]^2) + eps)) * silu(z[r, :])
 * x, z, out [rows, dim] f32 (rows = n_tok * n_v_heads, dim = d_v); w [dim]
 * f32, a plain weight (NOT 1 + w). silu(z) = z / (1 + exp(-z)).
 * out may equal x or z. Source: Qwen3_5RMSNormGated.forward (norm before
 * gate: weight * normed, then * silu(gate)). */
void frt_cpu_rmsnorm_gated(float *out, const float *x, const float *z, const float *w, int rows,
                           int dim, float eps);

/* L2 normalisation over the last dimension, in place.
 *   x[r, :] = x[r, :] * rsqrt(sum(x[r, :]^2) + eps)
 * x [rows, dim] f32. Qwen3.5 uses eps = 1e-6 on the Gated DeltaNet q and k
 * (rows = n_tok * n_k_heads, dim = d_k), before frt_cpu_gdr_*.
 * Source: l2norm() (FLA-aligned: rsqrt of (sum + eps), not 1/(norm + eps)).
 * The sum is accumulated in double and rounded to fp32. */
void frt_cpu_l2norm(float *x, int rows, int dim, float eps);

/* ---- positions ---------------------------------------------------------- */

/* Rotary position embedding, rotate-half (NeoX) form, in place on the first
 * rot_dim dims of each head; dims rot_dim..head_dim-1 pass through.
 * x [n_tok, n_heads, head_dim] f32; pos [n_tok] i32 (absolute positions).
 * rot_dim even, <= head_dim (Qwen3.5: head_dim 256, partial_rotary_factor
 * 0.25 -> rot_dim 64). With half = rot_dim / 2, for i < half:
 *   inv_freq[i] = 1.0f / powf(theta, (float)(2 i) / (float)rot_dim)   fp32
 *   a = (float)pos * inv_freq[i]                                       fp32
 *   x1 = x[i], x2 = x[i + half]
 *   x[i]        = x1 * cos(a) - x2 * sin(a)
 *   x[i + half] = x2 * cos(a) + x1 * sin(a)
 * Source: Qwen3_5TextRotaryEmbedding.compute_default_rope_parameters /
 * forward (fp32 inv_freq, fp32 freqs = inv_freq * pos, fp32 cos/sin) and
 * apply_rotary_pos_emb / rotate_half. The same fp32 order as HF, so results
 * are within an ulp or so of HF (libm cosf/sinf/powf vs torch's). The
 * multimodal interleaved M-RoPE of Qwen3.5 reduces to this for text, where
 * the temporal, height and width position ids are equal. */
void frt_cpu_rope(float *x, int n_tok, int n_heads, int head_dim, int rot_dim, const int32_t *pos,
                  float theta);

/* ---- full attention ----------------------------------------------------- */

/* Causal GQA attention of a block of n_tok query tokens at absolute positions
 * start_pos .. start_pos + n_tok - 1 over the KV cache. Decode is n_tok = 1.
 * q   [n_tok, n_heads, head_dim] f32 (after q_norm and RoPE)
 * k_cache, v_cache [max_seq, n_kv_heads, head_dim] f32; rows
 *     0 .. start_pos + n_tok - 1 are read (they must already hold this
 *     block's K and V); later rows are never touched.
 * out [n_tok, n_heads, head_dim] f32; must not alias q or the caches.
 * Query head h reads KV head h / (n_heads / n_kv_heads) (n_heads a multiple
 * of n_kv_heads; HF repeat_kv). Query token i attends to cache rows
 * 0 .. start_pos + i:
 *   s_j = scale * (q . k_j);  out = sum_j softmax(s)_j v_j
 * scale = head_dim^-0.5 for Qwen3.5. Softmax with max subtraction in fp32,
 * computed blockwise over 128 keys at a time (online softmax: running max
 * and sum, the partial output rescaled when the max grows), so no scratch is
 * needed. Source: eager_attention_forward with the causal mask; the output
 * gate (sigmoid) is applied by the caller (frt_cpu_sigmoid_mul). */
void frt_cpu_attention(float *out, const float *q, const float *k_cache, const float *v_cache,
                       int n_tok, int start_pos, int n_heads, int n_kv_heads, int head_dim,
                       float scale);

/* ---- Gated DeltaNet ----------------------------------------------------- */

/* Depthwise causal conv1d (no bias) followed by SiLU, with a carried state,
 * so a chunked prefill and token-by-token decode are exact continuations.
 * x, out [n_tok, channels] f32 (out must not alias x);
 * w [channels, kernel] f32 (HF conv1d.weight [channels, 1, kernel] squeezed);
 * conv_state [channels, kernel - 1] f32, the previous kernel - 1 inputs of
 * each channel, oldest first (zeros before the first token); updated in place
 * to the last kernel - 1 inputs of [conv_state, x]. With xpad = [state, x]:
 *   out[t, c] = silu( sum_{j < kernel} w[c, j] * xpad[t + j, c] )
 * (cross-correlation as torch F.conv1d: w[c, kernel-1] multiplies the current
 * input). Source: causal_conv1d_update / causal_conv1d_fn (torch fallbacks);
 * HF keeps `kernel` columns of state, only the last kernel - 1 matter. */
void frt_cpu_conv1d_causal(float *out, const float *x, float *conv_state, const float *w,
                           int n_tok, int channels, int kernel);

/* The Gated DeltaNet gates of n_tok tokens:
 *   g[t, h]    = -exp(A_log[h]) * softplus(a[t, h] + dt_bias[h])   (log-decay, <= 0)
 *   beta[t, h] = sigmoid(b[t, h])
 * a, b (the in_proj_a / in_proj_b outputs), g, beta [n_tok, n_heads] f32;
 * A_log, dt_bias [n_heads] f32; n_heads = n_v_heads. softplus as torch
 * (threshold 20: x > 20 -> x). Source: Qwen3_5GatedDeltaNet.forward. */
void frt_cpu_gdn_gate(float *g, float *beta, const float *a, const float *b, const float *A_log,
                      const float *dt_bias, int n_tok, int n_heads);

/* The gated delta rule, token by token (decode).
 * state [n_v_heads, dk, dv] f32, read and updated in place;
 * q, k  [n_tok, n_k_heads, dk] f32, ALREADY L2-normalised by the caller
 *       (frt_cpu_l2norm); the kernel applies the scale dk^-0.5 to q itself;
 * v     [n_tok, n_v_heads, dv] f32; g, beta [n_tok, n_v_heads] f32 (g the
 *       log-decay <= 0, frt_cpu_gdn_gate);
 * out   [n_tok, n_v_heads, dv] f32 (must not alias the inputs).
 * Value head h reads key head h / (n_v_heads / n_k_heads) (n_v_heads a
 * multiple of n_k_heads; HF repeat_interleave). Per token, per value head,
 * with S = state[h] [dk, dv]:
 *   S *= exp(g);  kv = S^T k;  delta = (v - kv) * beta;  S += k (x) delta;
 *   o = S^T (q * dk^-0.5)
 * Source: torch_recurrent_gated_delta_rule. Calling this n times with
 * n_tok = 1 gives the same bits as one call with n_tok = n. */
void frt_cpu_gdr_recurrent(float *out, float *state, const float *q, const float *k,
                           const float *v, const float *g, const float *beta, int n_tok,
                           int n_k_heads, int n_v_heads, int dk, int dv);

/* The gated delta rule, chunked (prefill): the same result as
 * frt_cpu_gdr_recurrent (same arguments, same layouts) computed chunk by
 * chunk of `chunk` tokens (64 in HF), starting a new chunk at token 0 of the
 * call. Per chunk and value head, with cum the in-chunk cumulative sum of g
 * (kept in fp64, so decays between two tokens are exp of an accurate
 * difference and nothing overflows), kb_i = beta_i k_i and q already scaled:
 *   A[i][j] = (kb_i . k_j) exp(cum_i - cum_j), j < i  (strictly lower)
 *   (I + A) U = [beta_i v_i],  (I + A) W = [kb_i exp(cum_i)]  (forward substitution)
 *   Vn = U - W S;  out_i = (q_i exp(cum_i)) S + sum_{j<=i} (q_i . k_j) exp(cum_i - cum_j) Vn_j
 *   S = S exp(cum_last) + sum_i (k_i exp(cum_last - cum_i)) (x) Vn_i
 * A tail shorter than `chunk` is a partial chunk: HF pads it with q = k = v
 * = g = beta = 0 rows, which change neither the real rows nor the state, so
 * the tail is simply computed with its real rows only.
 * Consequence used by the model layer: a prefill split into calls at token
 * counts that are multiples of `chunk` gives the same bits as one call.
 * Source: torch_chunk_gated_delta_rule (UT transform with the unit lower
 * triangular solve, inter-chunk scan).
 * Scratch is allocated per call: per OpenMP thread (at most n_v_heads of
 * them) 2 C^2 + C (2 dk + dv) floats and C doubles, C = min(chunk, n_tok);
 * 128 KiB per thread for C = 64, dk = dv = 128.
 * Returns 0, FRT_ERR_INVALID_ARGUMENT (chunk < 1) or FRT_ERR_OUT_OF_MEMORY
 * (then nothing is written: out and state untouched). */
int frt_cpu_gdr_chunked(float *out, float *state, const float *q, const float *k, const float *v,
                        const float *g, const float *beta, int n_tok, int n_k_heads,
                        int n_v_heads, int dk, int dv, int chunk);

/* ---- MLP and elementwise ------------------------------------------------ */

/* SwiGLU: out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)).
 * gate, up, out [n] f32; out may equal gate or up. Source: Qwen3_5MLP. */
void frt_cpu_swiglu(float *out, const float *gate, const float *up, int n);

/* y[i] += x[i] (the residual add). y, x [n] f32. */
void frt_cpu_add(float *y, const float *x, int n);

/* y[i] *= sigmoid(gate[i]), sigmoid(x) = 1 / (1 + exp(-x)). y, gate [n] f32.
 * The output gate of Qwen3_5Attention: attn_output * torch.sigmoid(gate). */
void frt_cpu_sigmoid_mul(float *y, const float *gate, int n);

/* y[i] = softplus(x[i]) = log1p(exp(x)), or x where x > 20 (torch's default
 * threshold). y, x [n] f32; y may equal x. */
void frt_cpu_softplus(float *y, const float *x, int n);

/* Copies a column block out of strided rows:
 *   dst[r, c] = src[r * src_stride + c],  r < rows, c < cols.
 * dst [rows, cols] f32 contiguous; src_stride >= cols (floats). Used to split
 * fused projections: q and gate of q_proj (per head [q | gate]: rows =
 * n_tok * n_heads, cols = head_dim, src_stride = 2 head_dim, src offset 0 or
 * head_dim), and q, k, v of the Gated DeltaNet conv output (rows = n_tok,
 * src_stride = 2 key_dim + value_dim). dst must not overlap src. */
void frt_cpu_copy_rows(float *dst, const float *src, int rows, int cols, int src_stride);

/* ---- GEMM --------------------------------------------------------------- */

/* y[n_tok, out_dim] = x[n_tok, in_dim] . w[out_dim, in_dim]^T (the HF Linear
 * layout: w is [out_features, in_features]; no bias), through OpenBLAS
 * cblas_sgemm. y must not alias x or w.
 * Determinism: OpenBLAS gives the same bits for the same shapes and the same
 * OpenBLAS thread count (OPENBLAS_NUM_THREADS / openblas_set_num_threads);
 * across thread counts, or for one row computed within a different n_tok, it
 * does not promise the same bits (it may pick other kernels or blockings).
 * The model layer keeps shapes (prefill buckets) and the thread count fixed. */
void frt_cpu_matmul(float *y, const float *x, const float *w, int n_tok, int in_dim, int out_dim);

/* y += x . w^T: as frt_cpu_matmul, accumulating into y (the residual add
 * fused into the output projection). */
void frt_cpu_matmul_add(float *y, const float *x, const float *w, int n_tok, int in_dim,
                        int out_dim);

/* ---- embedding ---------------------------------------------------------- */

/* out[t, :] = table[ids[t], :]. table [vocab, dim] f32; ids [n_tok] i32,
 * each in [0, vocab) (checked by the caller); out [n_tok, dim] f32. */
void frt_cpu_embedding(float *out, const float *table, const int32_t *ids, int n_tok, int dim);

/* As frt_cpu_embedding from a bf16 table [vocab, dim] (raw uint16 bits):
 * bf16 -> f32 is exact, (uint32_t)b << 16. */
void frt_cpu_embedding_bf16(float *out, const uint16_t *table, const int32_t *ids, int n_tok,
                            int dim);

/* ---- sampling ----------------------------------------------------------- */

/* Index of the largest logit, the lowest index on ties; NaN entries are
 * skipped (0 when all are NaN). logits [n] f32.
 * Returns the index, or FRT_ERR_INVALID_ARGUMENT when n < 1 or logits NULL. */
int frt_cpu_argmax(const float *logits, int n);

/* Floats of scratch that frt_cpu_sample needs for n logits. */
#define FRT_CPU_SAMPLE_SCRATCH(n) (2 * (size_t)(n))

/* Samples one token from logits [n] f32, deterministically from u:
 *   1. temperature == 0: frt_cpu_argmax (u unused).
 *   2. Order the tokens by (logit desc, index asc); NaN counts as -inf.
 *   3. top_k > 0: keep the first top_k (top_k 0 = off).
 *   4. p_i = exp((l_i - l_max) / temperature) over the kept set, in double.
 *   5. top_p < 1: keep the shortest prefix whose sum reaches top_p * total
 *      (at least one token; top_p 1 = off). HF order: temperature, top-k,
 *      top-p on the renormalised top-k set.
 *   6. Return the index of the first kept token whose cumulative p exceeds
 *      u * (sum of the kept p).
 * Without a cut (top_k 0 or >= n, and top_p 1) there is no order to keep:
 * steps 2, 3 and 5 are skipped and step 6 walks the tokens in index order
 * (min_p keeps the same set as its sorted prefix), so no sort runs; the
 * distribution is the same, only the token a given u picks differs. Should
 * rounding leave u * total unreached, that walk returns the argmax.
 * u in [0, 1), supplied by the caller (frt_rng_uniform on the RNG state in
 * the boundary record). A +inf logit (the first one in the order) wins
 * outright; all -inf/NaN returns the lowest such index.
 * scratch: FRT_CPU_SAMPLE_SCRATCH(n) floats, caller-owned, overwritten.
 * Cost: O(n log top_k) with top_k, a full sort of n with top_p alone,
 * two passes of n without a cut.
 * Returns the token index, or FRT_ERR_INVALID_ARGUMENT (n < 1 or n > 2^24,
 * NULL pointers, temperature < 0 or NaN, top_k < 0, top_p not in (0, 1],
 * u not in [0, 1)). */
int frt_cpu_sample(const float *logits, int n, float temperature, int top_k, float top_p, float u,
                   float *scratch);

/* frt_cpu_sample with min_p (frt/sampling.h step 5): after step 4, the
 * ordered tokens are cut to the prefix with p_i = exp((l_i - l_max) / T)
 * >= min_p (fp64; min_p 0 = off), before top-k and top-p. min_p in [0, 1],
 * else FRT_ERR_INVALID_ARGUMENT; otherwise as frt_cpu_sample (which is this
 * with min_p 0). Source: vLLM v1's sampler (min_p after temperature). */
int frt_cpu_sample_minp(const float *logits, int n, float temperature, int top_k, float top_p, float min_p,
                        float u, float *scratch);

/* Steps 1-3 of the sampling step (frt/sampling.h: logit bias, repetition
 * penalty, frequency and presence penalties; OpenAI's and vLLM's
 * definitions): out[i] = the adjusted logits[i]. logits, out [n] f32 (may
 * not alias); counts [n] i32 (times generated), seen [n] u8 (in the prompt
 * or output); *s read for the bias list and the penalties only. Bias tokens
 * are checked against n. The per-token arithmetic is kernels/cpu/
 * sample_rule.h, bit-identical to the CUDA kernel's.
 * Returns 0 or FRT_ERR_INVALID_ARGUMENT (NULL, n < 1, a bias token outside
 * [0, n), n_logit_bias outside [0, FRT_SAMPLING_MAX_BIAS]). */
int frt_cpu_logits_adjust(float *out, const float *logits, int n, const frt_sampling *s, const int32_t *counts,
                          const uint8_t *seen);

/* Step 3b of the sampling step (frt/sampling.h): the allowed-token mask,
 * in place: l[j] = -inf for every token j whose bit (bit j % 32 of
 * mask[j / 32]) is clear; allowed logits keep their bits. l [n] f32, mask
 * [ceil(n / 32)] u32 (bits past n ignored). The per-token rule is
 * frt_sample_mask of kernels/cpu/sample_rule.h, the CUDA kernel's.
 * Returns 0 or FRT_ERR_INVALID_ARGUMENT (NULL, n < 1). */
int frt_cpu_logits_mask(float *l, int n, const uint32_t *mask);

/* The logprobs of frt/sampling.h from logits [n] f32: *out gets token's
 * logprob and the top_n (0..FRT_SAMPLING_MAX_TOP_LOGPROBS) largest, order
 * (logit desc, id asc); fp64 log-sum-exp in index order, rounded to f32.
 * Returns 0 or FRT_ERR_INVALID_ARGUMENT (NULL, n < 1, token outside [0, n),
 * top_n out of range). */
int frt_cpu_logprobs(frt_logprobs *out, const float *logits, int n, int token, int top_n);

/* ---- policy (VLA) ops: SigLIP, Gemma prefix, action expert -------------- */

/* LayerNorm over the last dimension with weight and bias:
 *   out[r, :] = (x[r, :] - mean) / sqrt(var + eps) * w + b   (biased var)
 * x, out [rows, dim] f32 (out may equal x); w, b [dim] f32. Mean and
 * variance in double. Source: torch layer_norm as SiglipEncoderLayer uses it
 * (transformers 5.x modeling_siglip.py). */
void frt_cpu_layernorm(float *out, const float *x, const float *w, const float *b, int rows, int dim, float eps);

/* y[i] = gelu_tanh(x[i]) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 * (torch gelu approximate="tanh", "gelu_pytorch_tanh"); y may equal x. */
void frt_cpu_gelu_tanh(float *y, const float *x, int n);

/* out[i] = gelu_tanh(gate[i]) * up[i] (GemmaMLP's GeGLU); out may equal
 * gate or up. */
void frt_cpu_geglu_tanh(float *out, const float *gate, const float *up, int n);

/* y[i] = x[i] / (1 + exp(-x[i])) (SiLU); y may equal x. */
void frt_cpu_silu(float *y, const float *x, int n);

/* Classifier-free guidance (RECAP, pi*0.6 Appendix E):
 *   out[i] = fmaf(beta, v_cond[i] - v_uncond[i], v_uncond[i])
 * i.e. v_u + beta (v_c - v_u) with the difference rounded to f32 and one
 * rounding for the multiply-add. out, v_cond, v_uncond [n] f32; out may
 * equal either input. */
void frt_cpu_cfg_combine(float *out, const float *v_cond, const float *v_uncond, float beta, int n);

/* y[r, :] += b for each of rows rows of cols values (a Linear's bias). */
void frt_cpu_add_bias(float *y, const float *b, int rows, int cols);

/* Adaptive RMSNorm (Pi0.5's action expert):
 *   out[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * (1 + scale) + shift
 * x, out [rows, dim] f32 (out may equal x); scale, shift [dim] f32, shared by
 * every row (one condition per inference). Source: openpi models_pytorch
 * transformers_replace/models/gemma/modeling_gemma.py GemmaRMSNorm with
 * cond. */
void frt_cpu_rmsnorm_ada(float *out, const float *x, const float *scale, const float *shift, int rows, int dim,
                         float eps);

/* Patches of a stride-`patch` convolution: img [channels, height, width]
 * f32 -> out [(height/patch) * (width/patch), channels * patch * patch] f32,
 * patches in row-major order, each patch laid out (channel, ky, kx) like a
 * Conv2d weight [width, channels, patch, patch]; so the patch embedding is
 * out . weight^T. height and width must be multiples of patch. Source:
 * SiglipVisionEmbeddings (modeling_siglip.py). */
void frt_cpu_patchify(float *out, const float *img, int channels, int height, int width, int patch);

/* GQA attention under an explicit mask: query token t (of n_q) attends to
 * key j (of n_kv) iff allow[t * n_kv + j] != 0.
 *   out[t, h] = sum_j softmax_j(scale * q[t, h] . k[j, h / g]) v[j, h / g]
 * q, out [n_q, n_heads, head_dim] f32 (out must not alias q); k, v [n_kv,
 * n_kv_heads, head_dim] f32; allow [n_q, n_kv] u8; g = n_heads / n_kv_heads.
 * A row with no allowed key gives zeros. Softmax in fp32, online over the
 * allowed keys in ascending order. Source: eager_attention_forward with a
 * 4-D mask (transformers 5.x modeling_gemma.py); the masks of openpi
 * pi0_pytorch.py make_att_2d_masks. */
void frt_cpu_attention_masked(float *out, const float *q, const float *k, const float *v, const uint8_t *allow,
                              int n_q, int n_kv, int n_heads, int n_kv_heads, int head_dim, float scale);

#endif /* FRT_KERNELS_CPU_H */
