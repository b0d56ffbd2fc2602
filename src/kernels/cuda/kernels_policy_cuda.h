/*
 * kernels/cuda/kernels_policy_cuda.h - the CUDA kernels the robot policies
 * (Pi0 / Pi0.5, src/model/arch/pi0/pi0_cuda.c) add to kernels_cuda.h: the
 * SigLIP LayerNorm, the tanh GELU and GeGLU, Pi0.5's adaRMSNorm, a masked
 * softmax and an activation x activation batched matrix product (cuBLASLt),
 * which together make the masked attention of a policy.
 *
 * Conventions: those of kernels_cuda.h (stream as void *, launchers only
 * enqueue and are legal inside a capture, 0 / FRT_ERR_INVALID_ARGUMENT /
 * FRT_ERR_UNSUPPORTED / FRT_ERR_BACKEND, row-major contiguous layouts,
 * deterministic: no atomics, every reduction in a fixed order that depends
 * on the sizes only). Row counts are launch arguments here (a policy graph
 * runs at fixed shapes); what changes between replays (masks) is read from
 * device memory. Each kernel is tested against its CPU twin on random data
 * in tests/test_cuda_policy_kernels.c.
 */
#ifndef FRT_KERNELS_POLICY_CUDA_H
#define FRT_KERNELS_POLICY_CUDA_H

#include "kernels/cuda/kernels_cuda.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* LayerNorm of the rows of x [rows, dim] f32 (layernorm.cu):
 *   out = (x - mean) * rsqrt(var + eps) * w + b
 * mean and variance summed in fp64 (two passes over the row held in
 * registers, as the twin); w, b [dim] f32; out [rows, dim] of out_dtype
 * (must not alias x). One block a row, shaped to dim.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, rows or dim < 1), FRT_ERR_BACKEND.
 * Twin: frt_cpu_layernorm. */
int frt_cuda_layernorm(void *stream, void *out, frt_cuda_dtype out_dtype, const float *x, const float *w,
                       const float *b, int rows, int dim, float eps);

/* Adaptive RMSNorm (Pi0.5's expert; layernorm.cu):
 *   out = x * rsqrt(mean(x^2) + eps) * (1 + scale) + shift
 * x [rows, dim] f32; scale, shift [dim] f32 (device; one condition shared
 * by every row); out [rows, dim] of out_dtype (must not alias x). Sum of
 * squares in fp64. Errors as frt_cuda_layernorm. Twin: frt_cpu_rmsnorm_ada. */
int frt_cuda_rmsnorm_ada(void *stream, void *out, frt_cuda_dtype out_dtype, const float *x, const float *scale,
                         const float *shift, int rows, int dim, float eps);

/* The norm of frt_cuda_add_norm. */
typedef enum frt_cuda_norm_kind {
    FRT_CUDA_NORM_LAYER = 0,   /* LayerNorm: (x - mean) * rstd * w + b (SigLIP) */
    FRT_CUDA_NORM_RMS_ADA = 1, /* adaRMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w) + b (w scale, b shift) */
    FRT_CUDA_NORM_RMS_ONE = 2, /* Gemma RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w) (b unused, may be NULL) */
} frt_cuda_norm_kind;

/* A residual add and the norm that follows it, in one launch (layernorm.cu;
 * one block a row), for x [rows, dim] f32, updated in place:
 *   x[r, c] += (y[r, c] + bias[c]) * gate[c]     (y NULL: no add; bias,
 *                                                  gate [dim] f32 or NULL)
 *   out[r]   = norm(x[r])                         (kind above; w, b [dim] f32)
 * out [rows, dim] of out_dtype, must not alias x or y. The add is the
 * expression of pi0_cuda_residual (x gets its bits); the LayerNorm and
 * adaRMSNorm sum as frt_cuda_layernorm / frt_cuda_rmsnorm_ada do (fp64,
 * the same order).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL out / x / w, NULL b for LAYER or
 * RMS_ADA, an unknown kind, rows or dim < 1, aliasing), FRT_ERR_BACKEND.
 * Twins: frt_cpu_add_bias + frt_cpu_add (the residual), then
 * frt_cpu_layernorm / frt_cpu_rmsnorm_ada / frt_cpu_rmsnorm (zero-centred). */
int frt_cuda_add_norm(void *stream, void *out, frt_cuda_dtype out_dtype, float *x, const float *y, const float *bias,
                      const float *gate, frt_cuda_norm_kind kind, const float *w, const float *b, int rows, int dim,
                      float eps);

/* The activation after a Linear (gelu.cu). */
typedef enum frt_cuda_act {
    FRT_CUDA_ACT_NONE = 0,      /* y = x + b */
    FRT_CUDA_ACT_GELU_TANH = 1, /* y = gelu_tanh(x + b) (torch approximate="tanh") */
    FRT_CUDA_ACT_SILU = 2,      /* y = silu(x + b) */
} frt_cuda_act;

/* out[r, c] = act(x[r, c] + b[c]) for rows x cols: x [rows, cols] f32, b
 * [cols] f32 or NULL (no bias), out [rows, cols] of out_dtype (may equal x
 * when out_dtype is f32). Errors: FRT_ERR_INVALID_ARGUMENT (NULL, sizes < 1,
 * an unknown act), FRT_ERR_BACKEND. Twins: frt_cpu_add_bias then
 * frt_cpu_gelu_tanh / frt_cpu_silu. */
int frt_cuda_bias_act(void *stream, void *out, frt_cuda_dtype out_dtype, const float *x, const float *b, int rows,
                      int cols, frt_cuda_act act);

/* GeGLU (GemmaMLP): out[r, i] = gelu_tanh(gu[r, i]) * gu[r, inter + i] for
 * i < inter: gu [rows, 2 inter] of gu_dtype (f32 or bf16: the fused gate |
 * up projection), out [rows, inter] of out_dtype; the arithmetic in f32.
 * Errors as frt_cuda_bias_act. Twin: frt_cpu_geglu_tanh on the two halves. */
int frt_cuda_geglu_tanh(void *stream, void *out, frt_cuda_dtype out_dtype, const void *gu, frt_cuda_dtype gu_dtype,
                        int rows, int inter);

/* The tail of a Gemma layer over a few rows, as ONE cooperative launch
 * (gemma_mlp.cu; the policy expert's action tokens, where the launches it
 * replaces are bound by latency, not bytes). With att (optional), first
 * the layer's masked attention into attn (att->out must be attn):
 *   attn[t, h] = sum_j softmax_j(scale q[t, h] . k[j]) v[j]
 * over the keys att->mask allows (frt_cuda_attn_mask; a row without one
 * gets zeros), one KV head of head_dim 256, q [rows, heads 256] bf16
 * contiguous, k / v rows of ldkv bf16 (n_kv of them); S and P V in fp32
 * accumulators, P rounded to bf16 unnormalised, the softmax in fp32 over
 * key splits of 64 merged in split order (frt_cuda_attention_fused's
 * numerics); att->scores, probs, ld_s, mask.rows_per_token / tokens are
 * not read (a row's token is row / heads). att_work: device scratch of
 * frt_cuda_gemma_mlp_att_work_bytes. Twin: frt_cpu_attention_masked.
 * With attn (optional):
 *   x[r, c] = x[r, c] + (sum_k attn[r, k] o[c, k]) * o_gate[c]
 *   hb[r]   = norm(x[r]) of mlp_kind (mlp_w, mlp_b as frt_cuda_add_norm's
 *             w, b), bf16
 * then (always) the MLP block on hb:
 *   h[r, i]  = bf16(gelu_tanh(g) * u),  g = sum_k hb[r, k] gu[i, k],
 *              u = sum_k hb[r, k] gu[inter + i, k]        (f32 sums)
 *   x[r, c]  = x[r, c] + (sum_i h[r, i] down[c, i]) * gate[c]
 *   out[r]   = norm(x[r]) of kind (w, b); w NULL: no norm, out unused.
 * then, with qkv (optional; needs the norm and a bf16 out): the next
 * layer's q | k | v from out, pairs (p, p + head_dim / 2) of each head of q
 * and k rotated at pos[r] as pi0_cuda_qkv_rope_slots does (RoPE, angle
 * pos * inv_freq[p]), v copied, all rounded to bf16:
 *   q_out [rows, heads head_dim]; k_out, v_out rows ld_kv apart
 *   (kv_heads head_dim used: the suffix rows of a KV cache).
 * Residuals are frt_residual_add (gate / o_gate NULL: a plain add); norms
 * are adaRMSNorm or Gemma's RMSNorm. Shapes: attn bf16 [rows, q_dim], o
 * bf16 [width, q_dim], hb bf16 [rows, width] (the MLP's input: read, or
 * written by the first norm), gu bf16 [2 inter, width] (gate_proj's rows,
 * then up_proj's), down bf16 [width, inter], x f32 [rows, width] (updated
 * in place), gates, w, b f32 [width], out [rows, width] of out_dtype (may
 * alias hb: hb is read before out is written; must not alias x). work:
 * device scratch of frt_cuda_gemma_mlp_work_bytes (h and the products'
 * partial sums). The sums run in a fixed order that depends on the shape
 * alone.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL pointers, sizes < 1, attn without
 * o / q_dim / mlp_w, att without attn, its work, q / k / v, or with n_q
 * other than rows, heads x head_dim other than q_dim, a batch, a bad mask
 * or too little work, qkv without the norm, a bf16 out or its outputs, an
 * unknown norm kind, adaRMSNorm without its shift, out aliasing x, work too
 * small: checked before any device call);
 * FRT_ERR_UNSUPPORTED (a LayerNorm; rows > 64; width other than 1024;
 * inter not a multiple of 256, q_dim of 128 or head_dim of 16; att with
 * other than one KV head of 256, ldq other than q_dim or ldkv not a
 * multiple of 8; a pointer not 16-byte aligned; more shared memory than a block may have, or no cooperative
 * launch: frt_cuda_gemma_mlp_check says so without enqueueing, so a caller
 * can take the separate launches instead); FRT_ERR_BACKEND.
 * Twins: the products, frt_cpu_geglu_tanh, the residual, then
 * frt_cpu_rmsnorm_ada / frt_cpu_rmsnorm (zero-centred). */
typedef struct frt_cuda_gemma_mlp_args {
    /* the layer's attention first (att NULL: attn is given; see above) */
    const struct frt_cuda_attn_args *att;
    void *att_work;
    size_t att_work_bytes;
    /* o_proj, its residual and the MLP's norm (attn NULL: hb is the input) */
    const uint16_t *attn, *o;
    int q_dim;
    const float *o_gate;
    frt_cuda_norm_kind mlp_kind;
    const float *mlp_w, *mlp_b;
    /* the MLP block */
    void *out;
    frt_cuda_dtype out_dtype;
    float *x;
    const uint16_t *hb, *gu, *down;
    const float *gate;
    frt_cuda_norm_kind kind;
    const float *w, *b;
    float eps;
    int rows, width, inter;
    void *work;
    size_t work_bytes;
    /* the next layer's q | k | v with RoPE from out (qkv NULL: none) */
    const uint16_t *qkv;
    int heads, kv_heads, head_dim, ld_kv;
    uint16_t *q_out, *k_out, *v_out;
    const int32_t *pos;
    const float *inv_freq;
} frt_cuda_gemma_mlp_args;

/* Bytes of frt_cuda_gemma_mlp's work buffer for rows, width, inter and
 * q_dim (0: no o_proj): h and the partial sums. Errors:
 * FRT_ERR_INVALID_ARGUMENT. */
int frt_cuda_gemma_mlp_work_bytes(int rows, int width, int inter, int q_dim, size_t *bytes);

/* Bytes of the attention's work buffer (att_work) for n_q query tokens
 * of n_heads heads over n_kv keys: the key splits' partial outputs.
 * Errors: FRT_ERR_INVALID_ARGUMENT. */
int frt_cuda_gemma_mlp_att_work_bytes(int n_q, int n_heads, int n_kv, size_t *bytes);

/* 0 when frt_cuda_gemma_mlp takes *a on the current device; its errors
 * otherwise (nothing enqueued). Sets the kernel's shared-memory limit: call
 * at setup, outside a capture. */
int frt_cuda_gemma_mlp_check(const frt_cuda_gemma_mlp_args *a);

int frt_cuda_gemma_mlp(void *stream, const frt_cuda_gemma_mlp_args *a);

/* Test hook (timing only): launches made after this call stop after the
 * gate | up phase (n 1) or the down phase (n 2), or with the attention in
 * front after its key splits (n 4) or their merge (n 5); 3: the whole
 * launch (the results are otherwise incomplete). */
void frt_cuda_gemma_mlp_set_phases(int n);

/* frt_cuda_geglu_tanh of a bf16 gate | up product into bf16, then
 * frt_cuda_fp8_quantize_rows_dynamic of that row, in one launch (fp8.cu: a
 * block a row, the bf16 row staged in shared memory, never written to
 * global memory): q [rows, inter] E4M3 codes and q_scale [rows] f32 get the
 * bits of those two calls. gu [rows, 2 inter] bf16 (gate_proj's inter
 * columns, then up_proj's), 16-byte aligned, as q; q_scale 4-byte aligned;
 * inter a multiple of 8, at most 49152. The FP8 prefix MLP of a policy:
 * the codes are the down product's input. Errors: FRT_ERR_INVALID_ARGUMENT
 * (NULL, sizes, alignment); FRT_ERR_BACKEND. Twin: the two calls
 * (tests/test_cuda_policy_kernels.c). */
int frt_cuda_geglu_quantize(void *stream, uint8_t *q, float *q_scale, const uint16_t *gu, int rows, int inter);

/* Classifier-free guidance (RECAP, pi*0.6 Appendix E; cfg_combine.cu):
 *   out[i] = fmaf(beta, v_cond[i] - v_uncond[i], v_uncond[i])
 * the difference rounded to f32, one rounding for the multiply-add: the
 * same bits as the twin. out, v_cond, v_uncond [n] f32 (device; out may
 * equal either input). beta: read from *d_beta (device f32, so a captured
 * graph takes each replay's weight) when d_beta is not NULL, else the
 * argument. Vectorised (float4) when out, v_cond, v_uncond are 16-byte
 * aligned. Errors: FRT_ERR_INVALID_ARGUMENT (NULL, n < 1), FRT_ERR_BACKEND.
 * Twin: frt_cpu_cfg_combine. */
int frt_cuda_cfg_combine(void *stream, float *out, const float *v_cond, const float *v_uncond, float beta,
                         const float *d_beta, int n);

/* The masks of frt_cuda_softmax_masked. Score row r (of every batch in
 * turn) belongs to token t = (r / rows_per_token) % tokens; key j of that
 * row is allowed iff
 *   j < kmask_len:               d_kmask[j] != 0 (d_kmask NULL: allowed)
 *   kmask_len <= j < sfx_start:  never
 *   j >= sfx_start:              s = j - sfx_start < sfx_n, and, with
 *                                solo_first, t == 0 sees only s == 0
 *                                (Pi0's state token) while t > 0 sees all
 * and, when d_rmask is not NULL, the whole row is masked when
 * d_rmask[t] == 0 (it gets zeros). Bidirectional prefix: kmask = rmask =
 * the prefix mask, sfx_start = keys. Expert: kmask the prefix mask,
 * sfx_start the padded prefix length, sfx_n the suffix rows. */
typedef struct frt_cuda_attn_mask {
    const uint8_t *d_kmask; /* [kmask_len] u8 device, or NULL */
    int kmask_len;
    int sfx_start, sfx_n, solo_first;
    const uint8_t *d_rmask; /* [tokens] u8 device, or NULL */
    int rows_per_token;     /* >= 1: rows of one token (the heads of the folded GQA layout) */
    int tokens;             /* >= 1: tokens of one batch (rows wrap to token 0 at each batch) */
    long long kmask_stride; /* batch b = row / (tokens rows_per_token) reads d_kmask + b kmask_stride and
                               d_rmask + b kmask_stride (bytes, may be negative; 0: one mask for every
                               batch) */
} frt_cuda_attn_mask;

/* Softmax over the allowed keys of each row of s [rows, ld] f32 (the first
 * `keys` columns; s already scaled): p[row, j] = exp(s - max) / sum over the
 * allowed j, 0 for every masked key; a row with no allowed key is all zero.
 * p [rows, ld] bf16 (the P of P.V; columns keys..ld are not written); max
 * and sum in fp32, the sum in a fixed order that depends on `keys` only (one
 * warp a row up to 2048 keys, one block a row beyond). rows = batches x
 * tokens x rows_per_token; mask as above.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, sizes, ld < keys), FRT_ERR_BACKEND.
 * Twin: the softmax of frt_cpu_attention_masked (tested through
 * frt_cuda_attention_masked). */
int frt_cuda_softmax_masked(void *stream, uint16_t *p, const float *s, int rows, int keys, int ld,
                            const frt_cuda_attn_mask *mask);

/* Batched matrix products of activations on cuBLASLt (bmm.cu), bf16
 * operands, fp32 accumulation (CUBLAS_COMPUTE_32F), for batch b < batch:
 *   y_b[m, n] = alpha * x_b[m, k] . (trans_w ? w_b[n, k]^T : w_b[k, n])
 * x_b at x + b * sx with rows of ldx elements, w_b at w + b * sw (rows of
 * ldw), y_b at y + b * sy (rows of ldy) of y_dtype. The kernel is chosen by
 * cuBLASLt's heuristic once per layout (sizes, strides, dtype, and the
 * alignment of the pointers and strides) and cached in the handle (at most
 * 256 layouts); the workspace is the handle's own. */
typedef struct frt_cuda_bmm frt_cuda_bmm;

typedef struct frt_cuda_bmm_args {
    void *y;
    frt_cuda_dtype y_dtype;
    const uint16_t *x, *w;
    int m, n, k, trans_w, batch;
    long long ldx, ldw, ldy, sx, sw, sy;
    float alpha;
} frt_cuda_bmm_args;

/* Creates a handle with a workspace of workspace_bytes on the current
 * device (at setup, not inside a capture). Free with frt_cuda_bmm_destroy
 * (NULL-safe). Errors: FRT_ERR_INVALID_ARGUMENT, FRT_ERR_OUT_OF_MEMORY,
 * FRT_ERR_BACKEND. */
int frt_cuda_bmm_create(size_t workspace_bytes, frt_cuda_bmm **out);
void frt_cuda_bmm_destroy(frt_cuda_bmm *h);

/* Plans the layout of a (nothing is enqueued; a no-op when planned).
 * Call it at setup for every product a graph will capture: cuBLASLt's
 * heuristic query fails inside a stream capture. Errors:
 * FRT_ERR_INVALID_ARGUMENT (NULL, sizes < 1, ld shorter than a row),
 * FRT_ERR_UNSUPPORTED (cuBLASLt has no algorithm for the layout),
 * FRT_ERR_OUT_OF_RANGE (the handle holds 256 plans), FRT_ERR_BACKEND. */
int frt_cuda_bmm_plan(frt_cuda_bmm *h, const frt_cuda_bmm_args *a);

/* Enqueues one batched product with its plan; without one it plans first,
 * outside a capture (inside: FRT_ERR_STATE, nothing enqueued). Errors:
 * those of frt_cuda_bmm_plan; FRT_ERR_STATE. */
int frt_cuda_bmm_run(frt_cuda_bmm *h, void *stream, const frt_cuda_bmm_args *a);

/* Masked GQA attention (attention_masked.cu) for the two layouts the
 * policies have, as bmm + softmax + bmm:
 *   out[t, h] = sum_j softmax_j(scale q[t, h] . k[j, h / g]) v[j, h / g]
 * over the keys `mask` allows, g = n_heads / n_kv_heads, which must be 1
 * (MHA, SigLIP: one batch per head) or n_kv_heads must be 1 (Gemma: every
 * head of a token is one row of a single product); else
 * FRT_ERR_UNSUPPORTED. q [n_q, n_heads, head_dim] bf16 with rows of ldq
 * elements; k, v [n_kv, n_kv_heads, head_dim] bf16 with rows of ldkv; out
 * [n_q, n_heads, head_dim] bf16 contiguous. scores f32 and probs bf16 are
 * scratch of n_q * n_heads * ld_s elements each, ld_s >= n_kv (a multiple of
 * 8 keeps rows 16-byte aligned).
 * batch > 1 (one KV head only; MHA: FRT_ERR_UNSUPPORTED): `batch`
 * independent attentions of this layout in the same launches (fused CFG's
 * slots, its two prefixes): attention b reads q + b sq, k + b skv, v + b
 * skv and the masks d_kmask + b mask.kmask_stride (and d_rmask + b
 * mask.kmask_stride), writes out + b sout; its scores and probs
 * rows follow attention b - 1's (scratch of batch times the size above).
 * Strides in elements, >= 0. batch 0 or 1: one attention (strides unused).
 * Errors: those of the parts.
 * Twin: frt_cpu_attention_masked with allow[t, j] from `mask`. */
typedef struct frt_cuda_attn_args {
    uint16_t *out;
    const uint16_t *q, *k, *v;
    int ldq, ldkv;
    int n_q, n_kv, n_heads, n_kv_heads, head_dim;
    float scale;
    float *scores;
    uint16_t *probs;
    int ld_s;
    frt_cuda_attn_mask mask;
    int batch;                 /* 0 / 1: one attention; > 1: see above */
    long long sq, skv, sout;   /* the batch strides (elements) */
} frt_cuda_attn_args;

int frt_cuda_attention_masked(frt_cuda_bmm *h, void *stream, const frt_cuda_attn_args *a);

/* n attentions of one layout (the same sizes, scale and mask; other q, k,
 * v, out) in 2 n + 1 launches instead of 3 n: every S = scale Q K^T, one
 * softmax over all their score rows, every O = P V. a[i].scores and
 * a[i].probs must follow a[i - 1]'s (a[0].scores + i * n_q * n_heads *
 * ld_s, the same for probs); batch 0 or 1 each. The bits of n
 * frt_cuda_attention_masked calls.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, n outside 1..FRT_CUDA_ATTN_MANY_MAX,
 * another layout or scratch that does not follow), those of the parts. */
#define FRT_CUDA_ATTN_MANY_MAX 64
int frt_cuda_attention_masked_many(frt_cuda_bmm *h, void *stream, const frt_cuda_attn_args *a, int n);

/* Plans the two products of frt_cuda_attention_masked(h, ., a) (at setup;
 * nothing is enqueued). Errors: those of frt_cuda_bmm_plan and of the
 * argument checks above. */
int frt_cuda_attention_masked_plan(frt_cuda_bmm *h, const frt_cuda_attn_args *a);

/* RoPE on load for frt_cuda_attention_fused (the expert: no separate
 * q / k / v kernel, and its suffix K / V never stored): query row (t, h)
 * of attention b is head h of token t of qkv, and suffix key sfx_start + s
 * (s < sfx_n <= n_q) is the k / v of token s, K and q RoPE'd (rotate-half,
 * whole head) at cs[b][t] as they are staged; prefix keys (below
 * sfx_start) come from k / v as without it, and a->q is not read.
 *   qkv [batch, n_q, n_heads + 2, head_dim] f32 (q heads, then k, v), 16-byte aligned
 *   cs  [batch][n_q][head_dim / 2][2] f32: (cos, sin) of token t's angle
 *       for each rotated pair (attention b at cs + b s_cs floats)
 * The rotation is pi0_cuda_qkv_rope's expression with its cosf / sinf
 * (pi0_cuda_suffix_pos writes cs with them), so q, k, v are staged with
 * the bits that kernel would have stored. */
typedef struct frt_cuda_attn_rope {
    const float *qkv, *cs;
    long long s_cs; /* floats, a multiple of 4; unused when batch <= 1 */
} frt_cuda_attn_rope;

/* The same masked attention for one KV head in ONE launch
 * (attention_fused.cu; the expert's attention, fused CFG's batch of 2
 * included): tensor-core FlashAttention-2 with an fp32 online softmax,
 * the keys cut into 8 splits merged inside a thread block cluster (sm_90).
 * Arguments as frt_cuda_attention_masked (q [n_q, n_heads, head_dim] bf16
 * contiguous, k / v rows of ldkv bf16, out [n_q, n_heads, head_dim] bf16,
 * the mask, batch with its strides); scores, probs and ld_s are not read
 * (no scratch: everything stays on chip), nor are mask.rows_per_token and
 * mask.tokens (a row's token is row / n_heads, as the products' softmax
 * has it). Numerics: S and P V accumulate in fp32; P is rounded to bf16
 * unnormalised (the products round it normalised), so the two paths
 * agree to bf16 rounding, not bit for bit. A row without an allowed key
 * gets zeros. Deterministic (no atomics, fixed orders).
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, sizes < 1, a bad mask, negative
 * strides, batch > 65535, out == q, ldkv < head_dim; with rope: a NULL
 * rope.qkv / rope.cs, a negative rope.s_cs, sfx_n > n_q);
 * FRT_ERR_UNSUPPORTED (n_kv_heads != 1, head_dim not 16, 32, 64, 128 or
 * 256, query rows not contiguous (ldq != n_heads head_dim), a pointer,
 * ldkv, a batch stride or rope.s_cs not 16-byte aligned); FRT_ERR_BACKEND.
 * Nothing is enqueued on an error. rope NULL: q, k, v as stored; else see
 * frt_cuda_attn_rope.
 * Twin: frt_cpu_attention_masked with allow[t, j] from `mask`. */
int frt_cuda_attention_fused(void *stream, const frt_cuda_attn_args *a, const frt_cuda_attn_rope *rope);

/* The checks of frt_cuda_attention_fused alone (nothing enqueued, no
 * device needed): 0 when it takes (a, rope), else its error. */
int frt_cuda_attention_fused_check(const frt_cuda_attn_args *a, const frt_cuda_attn_rope *rope);

/* Unmasked multi-head attention (attention_mha.cu; SigLIP's attention
 * within a camera: every query row sees every key), for each attention b
 * of the batch and head h:
 *   out[t, h] = sum_j softmax_j(scale q[t, h] . k[j, h]) v[j, h]
 * over the n keys of b, in ONE launch (FlashAttention-2's online softmax
 * on mma.sync, every key staged in shared memory). q, k, v, out bf16:
 * row t of attention b at q + b sq + t ldq (heads side by side, head_dim
 * each; k, v at ldkv, skv; out at ldo, so), strides in elements.
 * Or, with qkv_f32 (q, k, v NULL, ldq / ldkv / sq / skv unused): the
 * f32 output of a fused q | k | v projection, row t of attention b at
 * qkv_f32 + b s_f32 + t ld_f32 (q at column 0, k at n_heads head_dim, v at
 * 2 n_heads head_dim), plus bias [3 n_heads head_dim] f32 (NULL: none),
 * each value rounded to bf16 as it is staged: the same bits as
 * frt_cuda_bias_act into bf16 and then the bf16 form, one launch fewer.
 * Numerics: S and P V in fp32 accumulators, the softmax in fp32, P rounded
 * to bf16 unnormalised (frt_cuda_attention_fused's): within bf16 rounding
 * of frt_cuda_attention_masked, not bit for bit. Deterministic.
 * Errors: FRT_ERR_INVALID_ARGUMENT (NULL, neither or both of q / k / v and
 * qkv_f32, sizes < 1, batch or heads > 65535, scale <= 0, row strides
 * under heads x head_dim (3 heads x head_dim for ld_f32), negative batch
 * strides); FRT_ERR_UNSUPPORTED (n > 256 keys, head_dim not a multiple of
 * 8 or > 128, pointers or strides not 16-byte aligned); FRT_ERR_BACKEND.
 * Nothing is enqueued on an error.
 * Twin: frt_cpu_attention_masked with every key allowed. */
typedef struct frt_cuda_mha_args {
    uint16_t *out;
    const uint16_t *q, *k, *v;
    int ldq, ldkv, ldo;
    int n, n_heads, head_dim;
    float scale;
    int batch;
    long long sq, skv, so;
    const float *qkv_f32, *bias; /* the f32 form (above) */
    int ld_f32;
    long long s_f32;
} frt_cuda_mha_args;

int frt_cuda_attention_mha(void *stream, const frt_cuda_mha_args *a);

/* The checks of frt_cuda_attention_mha alone (no device needed, nothing
 * enqueued): 0 when it takes *a, else its error. */
int frt_cuda_attention_mha_check(const frt_cuda_mha_args *a);

#ifdef __cplusplus
}
#endif
#endif /* FRT_KERNELS_POLICY_CUDA_H */
