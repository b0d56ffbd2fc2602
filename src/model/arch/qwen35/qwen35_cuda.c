/*
 * arch/qwen35/qwen35_cuda.c - the Qwen3.5 hybrid forward pass on the cuda
 * backend: the same function, step for step, as qwen35_cpu.c (whose header
 * names the math source, transformers' modeling_qwen3_5.py), launched as
 * kernels/cuda kernels on the model's stream and captured into CUDA graphs
 * once at load (one prefill variant per length bucket, decode, sample).
 *
 * Storage and precision:
 *   weights      bf16 on the device, one allocation (the "cuda.weights"
 *                buffer); other float checkpoint dtypes are widened to f32 and
 *                rounded to nearest even (util/bf16.h). The small per-channel
 *                tensors (every norm weight, conv1d, A_log, dt_bias) are f32,
 *                as the kernels take them. in_proj_b and in_proj_a are fused
 *                into one [round_up(2 nv, 8), hidden] matrix (rows b, then a,
 *                then zeros) so the GEMM's out dim is a multiple of 8. A tied
 *                lm_head is the embedding.
 *                With FP8 weights (params.weight_dtype FRT_WEIGHT_FP8;
 *                docs/fp8.md "FP8 weights") every decoder Linear weight is
 *                E4M3 codes [out, in] + one f32 scale per output row
 *                (frt_fp8w_linear_codes: the cpu emulation's codes and
 *                scales; b | a padded to a multiple of 16 rows, the padding
 *                code 0, scale 0): decode through the E4M3 GEMVs
 *                (gemv_fp8.h, scales in the epilogue, the activations
 *                kept), a prefill piece quantizes each product's bf16 input
 *                per token (frt_cuda_fp8_quantize_rows_dynamic) for the FP8
 *                GEMM (gemm_fp8.h). The embedding and lm_head stay bf16
 *                (params.lm_head_dtype FRT_WEIGHT_FP8: the lm_head, a tied
 *                one a copy, as E4M3 codes + per-row scales, run by the
 *                E4M3 GEMV: c->head, lm_head_cuda.h).
 *   activations  residual stream f32; GEMM inputs bf16 (the normed hidden,
 *                the attention / Gated DeltaNet / SwiGLU outputs); GEMM
 *                outputs f32 (cuBLASLt, fp32 accumulation); the mixers'
 *                internals f32.
 *   state        KV cache bf16 (kv_dtype bf16), recurrent and conv state
 *                f32, as qwen35.c declares them (the runtime allocates them).
 *                With params.kv_dtype FRT_KV_FP8 the KV cache holds E4M3
 *                codes with static per-head scales (attention_fp8: K after
 *                k_norm and the partial RoPE, quantized by
 *                frt_cuda_kv_append_fp8; attention over the codes with
 *                frt_cuda_attention_prefill_fp8 / frt_cuda_attention_fp8;
 *                docs/fp8.md); the recurrent and conv states stay f32.
 *
 * Graphs: every value that changes between replays is read from device
 * memory by the kernels: the start position (boundary.pos), the valid rows
 * of a prefill piece (step.n_valid), the token to feed (boundary.pending,
 * decode), the sampling parameters (step.sampling) and the
 * RNG (boundary.rng[0]). A prefill variant is sized for its bucket: GEMMs
 * run on all bucket rows (the padding rows compute values nothing reads),
 * every other kernel touches only the first n_valid rows, so the KV cache,
 * conv state, recurrent state and token journal see exactly the valid rows.
 * The end of a step updates the boundary on the device (qwen35_glue.cu):
 * pos += n, has_logits = 1, pending = -1; decode then samples into pending.
 * No host synchronisation inside a step. GEMM algorithms are chosen at load
 * (alloc_scratch, or frt_qwen35_cu_prefill_group before it), never on the
 * request path.
 *
 * Prefill groups (docs/architectures.md "Prefill groups"): a cold prefill's
 * whole pieces of C rows run up to m->G (default 8) a replay, the variant of
 * bucket j * C. Every product runs once over the j * C rows with a group
 * plan checked at load to give each row its piece's bytes
 * (frt_qwen35_cu_prefill_group, group_cuda.h), fused or not as a piece of C
 * rows is (at_one, dn_one); the attention runs a piece's key splits over
 * several pieces a launch (frt_group_attention, the piece starts from
 * frt_group_pos); the Gated DeltaNet conv and chunked gated delta rule take
 * the group's rows in one call each (their carried state makes that the
 * bits of one call a piece); every other kernel is row-wise. debug_hidden
 * runs one piece a replay.
 */
#include "model/arch/qwen35/qwen35_cuda.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemv_fp8.h"
#include "model/arch/group_cuda.h"
#include "model/arch/qwen35/qwen35_glue.h"
#include "util/bf16.h"
#include "util/error.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the forward pass --------------------------------------------------- */

/* What one recorded step works on. */
typedef struct fwd {
    frt_model *m;
    cu_model *c;
    frt_stream *s;        /* the recording stream */
    void *st;             /* cudaStream_t */
    int R;                /* rows of the variant: the bucket, a group's pieces * C, or 1 for decode */
    int decode;
    int pieces;           /* prefill: the whole pieces of C rows a group replay runs (R = pieces * C); 1 otherwise */
    const int32_t *d_n;   /* valid rows (step.n_valid), NULL for decode (= 1) */
    const int32_t *d_no_logits; /* step.no_logits (prefill: skip the LM head), NULL for decode */
    int at_one, dn_one;   /* prefill: one GEMM for q | k | v, for in_proj_qkv | z | b | a (one_gemm) */
    int32_t *d_pos;       /* boundary.pos */
    int32_t *d_pending;   /* boundary.pending */
    int32_t *d_has_logits;
    uint64_t *d_rng;      /* boundary.rng[0] */
    const float *d_temperature; /* step.temperature */
    const frt_cuda_sampler_params *d_params;
    const int32_t *d_mask_on; /* step.mask_on: apply the token_mask port */
} fwd;

static fwd fwd_make(frt_stream *s, frt_model *m, int R, int decode)
{
    fwd f;
    memset(&f, 0, sizeof f);
    f.m = m;
    f.c = m->bk_data;
    f.s = s;
    f.st = frt_stream_native(s);
    f.R = R;
    f.decode = decode;
    char *bd = frt_buffer_ptr(m->boundary), *sp = frt_buffer_ptr(m->step);
    f.d_n = decode ? NULL : (const int32_t *)(const void *)(sp + offsetof(frt_step_args, n_valid));
    f.d_no_logits = decode ? NULL : (const int32_t *)(const void *)(sp + offsetof(frt_step_args, no_logits));
    f.pieces = frt_group_pieces(m, R, decode);
    const int rows = f.pieces > 1 ? m->C : R; /* a group: its pieces' fused / unfused products */
    f.at_one = !decode && at_one(f.c, rows);
    f.dn_one = !decode && dn_one(f.c, rows);
    f.d_pos = (int32_t *)(void *)(bd + offsetof(frt_boundary, pos));
    f.d_pending = (int32_t *)(void *)(bd + offsetof(frt_boundary, pending));
    f.d_has_logits = (int32_t *)(void *)(bd + offsetof(frt_boundary, has_logits));
    f.d_rng = (uint64_t *)(void *)(bd + offsetof(frt_boundary, rng));
    f.d_temperature = (const float *)(const void *)(sp + offsetof(frt_step_args, sampling.temperature));
    f.d_params = (const frt_cuda_sampler_params *)(const void *)(sp + offsetof(frt_step_args, sampling));
    f.d_mask_on = (const int32_t *)(const void *)(sp + offsetof(frt_step_args, mask_on));
    return f;
}

/* FP8 weights in a prefill piece (docs/fp8.md "FP8 activations"): x [R,
 * in] bf16 quantized per token into c->xq / c->xs, the input of the lin
 * calls that follow (a no-op otherwise). */
static int act_fp8(const fwd *f, const uint16_t *x, int in)
{
    cu_model *c = f->c;
    if (!c->wfp8 || f->decode) return 0;
    return frt_cuda_fp8_quantize_rows_dynamic(f->st, c->xq, c->xs, x, f->R, in);
}

/* FP8 prefill: act_fp8 of the normed input c->h, unless the add_norm that
 * wrote it quantized it too (by_norm: every norm before a mixer or the MLP
 * but the first layer's, a plain rmsnorm; add_norm). */
static int h_fp8(const fwd *f, int by_norm)
{
    if (by_norm) return 0;
    return act_fp8(f, f->c->h, f->c->H);
}

/* A prefill piece: y [R, out] f32 = x [R, in] bf16 . W^T, bf16 w through
 * the GEMM plan, or with FP8 weights the FP8 GEMM on c->xq (act_fp8 of x
 * before): (xq . wq^T) * s_x[t] * s_w[o]. */
static int lin(const fwd *f, float *y, const uint16_t *x, cu_lin w, int in, int out)
{
    cu_model *c = f->c;
    if (!c->wfp8) return frt_cuda_gemm_run(c->gemm, f->st, y, F32, x, w.w, f->R, in, out, 0);
    return frt_cuda_gemm_fp8_run(c->gemm8, f->st, y, F32, c->xq, c->xs, w.q, w.s, f->R, in, out);
}

/* Decode rows: y [g, H] f32 += x [g, in] bf16 . W^T, the GEMV's
 * accumulating store (bf16 w through the plan's GEMV, or the E4M3 GEMV with
 * the scales in its epilogue; both batch-invariant). */
static int resid_add(const fwd *f, float *y, const uint16_t *x, cu_lin w, int g, int in)
{
    cu_model *c = f->c;
    if (c->wfp8) return frt_cuda_gemv_fp8(f->st, y, F32, 1, x, w.q, w.s, g, in, c->H);
    return frt_cuda_gemm_run(c->gemm, f->st, y, F32, x, w.w, g, in, c->H, 1);
}

/* A block's output projection x [R, in] bf16 . w [H, in]^T: decode adds it
 * straight into the residual stream c->x (the GEMV's accumulating store is
 * fl(sum + x), the bits of storing delta and adding it in f32); prefill
 * writes c->delta, which the next add_rmsnorm adds. */
static int gemm_out(const fwd *f, const uint16_t *x, cu_lin w, int in)
{
    cu_model *c = f->c;
    if (f->decode) return resid_add(f, c->x, x, w, f->R, in);
    FRT_TRY(act_fp8(f, x, in));
    return lin(f, c->delta, x, w, in, c->H);
}

/* One product of gemv_products: y [g, out] f32 = x . W^T. */
typedef struct prod {
    float *y;
    cu_lin w;
    int out;
} prod;

/* Decode rows: the n (<= 4) products of one x in one GEMV launch (bf16 or
 * E4M3 weights): x [g, H] bf16, or with nm its RMSNorm prologue's rows of
 * the residual (the bits of rmsnorm + the GEMVs). */
static int gemv_products(const fwd *f, const prod *p, int n, const uint16_t *x, const frt_cuda_gemv_norm *nm, int g)
{
    cu_model *c = f->c;
    if (c->wfp8) {
        frt_cuda_gemv_fp8_entry e[4];
        for (int i = 0; i < n; i++) {
            const frt_cuda_gemv_fp8_entry ei = {p[i].y, F32, p[i].w.q, p[i].w.s, p[i].out};
            e[i] = ei;
        }
        return nm ? frt_cuda_gemv_fp8_multi_norm(f->st, e, n, nm, g, c->H)
                  : frt_cuda_gemv_fp8_multi(f->st, e, n, x, g, c->H);
    }
    frt_cuda_gemv_entry e[4];
    for (int i = 0; i < n; i++) {
        const frt_cuda_gemv_entry ei = {p[i].y, F32, p[i].w.w, p[i].out};
        e[i] = ei;
    }
    return nm ? frt_cuda_gemv_multi_norm(f->st, e, n, nm, g, c->H) : frt_cuda_gemv_multi(f->st, e, n, x, g, c->H);
}

/* Decode rows: gate, up and silu(gate) * up of layer l in one GEMV launch
 * into act [g, I] bf16 (bf16 or E4M3 weights; x and nm as gemv_products). */
static int swiglu_products(const fwd *f, const cu_layer *lw, uint16_t *act, const uint16_t *x,
                           const frt_cuda_gemv_norm *nm, int g)
{
    cu_model *c = f->c;
    if (c->wfp8) {
        const frt_cuda_gemv_fp8_mat gate = {lw->gate_proj.q, lw->gate_proj.s}, up = {lw->up_proj.q, lw->up_proj.s};
        return nm ? frt_cuda_gemv_fp8_swiglu_norm(f->st, act, BF16, nm, &gate, &up, g, c->H, c->I)
                  : frt_cuda_gemv_fp8_swiglu(f->st, act, BF16, x, &gate, &up, g, c->H, c->I);
    }
    return nm ? frt_cuda_gemv_swiglu_norm(f->st, act, BF16, nm, lw->gate_proj.w, lw->up_proj.w, g, c->H, c->I)
              : frt_cuda_gemv_swiglu(f->st, act, BF16, x, lw->gate_proj.w, lw->up_proj.w, g, c->H, c->I);
}

/* Decode: the RMSNorm of the residual c->x with weight w (zero-centred), as
 * the prologue of the GEMV that consumes it. */
static frt_cuda_gemv_norm resid_norm(const fwd *f, const float *w)
{
    frt_cuda_gemv_norm nm = {f->c->x, w, f->c->eps, 1};
    return nm;
}

/* Copies the rows of a hidden state [R, H] f32 into debug slot idx. */
static int debug_copy(const fwd *f, int idx, const float *src)
{
    cu_model *c = f->c;
    if (!c->debug) return 0;
    size_t H = (size_t)c->H;
    float *dst = c->debug + (size_t)idx * (size_t)f->m->C * H;
    FRT_CUDA_TRY(cudaMemcpyAsync(dst, src, (size_t)f->R * H * sizeof(float), cudaMemcpyDeviceToDevice,
                                 (cudaStream_t)f->st));
    return 0;
}

/* Rows of a full-attention layer, on stream st: qg [R, qw] f32 (q | gate
 * per head), k, v [R, kvw] f32 in; q and zg [R, ad] f32 (the query, the
 * gate) and o [R, ad] f32 (attention) out; k is normalised and roped in
 * place. d_pos, d_n: the rows' start and count (d_n NULL: 1); ws: the
 * decode attention's split workspace. */
typedef struct attn_rows {
    void *st;
    int R, decode;
    const int32_t *d_pos, *d_n;
    const float *qg, *v;
    float *k, *q, *zg, *o;
    void *ws;
} attn_rows;

/* The split of qg into q and the gate, the q / k norms (zero-centred) and
 * the partial RoPE of q and k: the unfused sequence whose bits
 * frt_cuda_attn_prep and frt_cuda_attn_decode_prep give (without the
 * append). */
static int prep_unfused(const fwd *f, int l, const attn_rows *r)
{
    const cu_model *c = f->c;
    const cu_layer *lw = &c->layers[l];
    const int R = r->R, nh = c->nh, nkv = c->nkv, hd = c->hd, per_head = c->gated ? 2 * hd : hd;
    FRT_TRY(frt_cuda_copy_rows(r->st, r->q, F32, r->qg, F32, r->d_n, R, nh, hd, per_head));
    if (c->gated) FRT_TRY(frt_cuda_copy_rows(r->st, r->zg, F32, r->qg + hd, F32, r->d_n, R, nh, hd, per_head));
    FRT_TRY(frt_cuda_rmsnorm(r->st, r->q, F32, r->q, F32, lw->q_norm, r->d_n, R, nh, hd, c->eps, 1));
    FRT_TRY(frt_cuda_rmsnorm(r->st, r->k, F32, r->k, F32, lw->k_norm, r->d_n, R, nkv, hd, c->eps, 1));
    FRT_TRY(frt_cuda_rope(r->st, r->q, F32, r->d_pos, r->d_n, R, nh, hd, c->rot, c->theta));
    return frt_cuda_rope(r->st, r->k, F32, r->d_pos, r->d_n, R, nkv, hd, c->rot, c->theta);
}

/* A prefill replay's attention of r->q over layer l's cache (bf16, or
 * E4M3 codes with the per-head scales ks / vs) into r->o f32: the
 * FlashAttention kernel (tensor cores for head_dim 64 / 128 / 256, else the
 * CUDA-core kernel); a group replay runs its pieces c->attn_pieces a launch
 * with a piece's key splits (starts from c->gpos), so every row gets its
 * piece's bits (frt_group_attention). */
static int attn_prefill(const fwd *f, const attn_rows *r, const void *kc, const void *vc, const float *ks,
                        const float *vs)
{
    const cu_model *c = f->c;
    const frt_group_attn g = {.stream = r->st, .out = r->o, .out_dtype = F32, .q = r->q, .q_dtype = F32, .k_cache = kc,
                              .v_cache = vc, .k_scale = ks, .v_scale = vs, .d_start = r->d_pos, .d_n = r->d_n,
                              .rows = r->R, .gpos = c->gpos, .pieces = f->pieces, .run = c->attn_pieces,
                              .C = f->m->C, .max_seq = f->m->max_seq, .n_heads = c->nh, .n_kv_heads = c->nkv,
                              .head_dim = c->hd, .scale = c->scale, .ws = c->prefill_attn_ws,
                              .ws_bytes = c->prefill_attn_ws_bytes};
    return frt_group_attention(&g);
}

/* Layer l's FP8 K (kv 0) or V (kv 1) scales [nkv] f32 (device). */
static const float *kv_scale(const cu_model *c, int l, int kv)
{
    return c->kv_scale + (size_t)(2 * l + kv) * (size_t)c->nkv;
}

/* The FP8 KV cache (c->fp8, docs/fp8.md) of layer l, the bound slot's:
 * the split, the q / k norms, RoPE, and K (after RoPE) and V quantized into
 * the E4M3 cache with the static per-head scales in one launch
 * (frt_cuda_attn_prep_fp8: the bits of prep_unfused and
 * frt_cuda_kv_append_fp8, those of the cpu codec on the same f32 rows),
 * then attention over the codes: decode the
 * flash-decoding splits (fp32 accuracy; tensor cores for head_dim 64 / 128
 * / 256), a prefill piece the tensor-core FlashAttention (Q and P in bf16),
 * other head sizes the CUDA-core kernel (dequantized on load, f32). */
static int attention_fp8(const fwd *f, int l, const attn_rows *r)
{
    frt_model *m = f->m;
    cu_model *c = f->c;
    const int R = r->R, nh = c->nh, nkv = c->nkv, hd = c->hd, S = m->max_seq;
    uint8_t *kc = frt_buffer_ptr(qwen35_of(m)->kv_k[l]), *vc = frt_buffer_ptr(qwen35_of(m)->kv_v[l]);
    const float *ks = kv_scale(c, l, 0), *vs = kv_scale(c, l, 1);
    const cu_layer *lw = &c->layers[l];
    /* q | gate rows of c->qw floats, k and v rows of c->kvw (the separate products) */
    FRT_TRY(frt_cuda_attn_prep_fp8(r->st, r->q, c->gated ? r->zg : NULL, kc, vc, ks, vs, r->qg, c->qw, r->k, c->kvw,
                                   r->v, c->kvw, lw->q_norm, lw->k_norm, r->d_pos, r->d_n, R, S, nh, nkv, hd,
                                   c->rot, c->theta, c->eps, 1, c->gated));
    if (r->decode)
        return frt_cuda_attention_fp8(r->st, r->o, F32, r->q, F32, kc, vc, ks, vs, r->d_pos, r->d_n, R, S, nh, nkv, hd,
                                      c->scale, DECODE_SPLIT, r->ws, c->attn_ws_bytes);
    return attn_prefill(f, r, kc, vc, ks, vs);
}

/* The bf16 KV cache of layer l: the prep (one fused launch for decode and
 * for a one-GEMM prefill piece, else prep_unfused) with the bf16 append,
 * then attention into c->o. */
static int attention_bf16(const fwd *f, int l, const attn_rows *r)
{
    frt_model *m = f->m;
    cu_model *c = f->c;
    const cu_layer *lw = &c->layers[l];
    void *st = f->st;
    int R = f->R, nh = c->nh, nkv = c->nkv, hd = c->hd;
    uint16_t *kc = frt_buffer_ptr(qwen35_of(m)->kv_k[l]), *vc = frt_buffer_ptr(qwen35_of(m)->kv_v[l]);
    if (f->decode) { /* split, q/k norms, RoPE and the KV append in one launch (q within 1e-8 of the unfused path) */
        FRT_TRY(frt_cuda_attn_decode_prep(st, c->q, c->gated ? c->zg : NULL, kc, vc, c->t0, c->k, c->v, lw->q_norm,
                                          lw->k_norm, f->d_pos, f->d_n, m->max_seq, nh, nkv, hd, c->rot, c->theta,
                                          c->eps, 1, c->gated));
    } else if (f->at_one) {
        /* split, q/k norms, RoPE and the KV append of every row in one launch (the same bits as
         * the sequence below) */
        const int W = c->at_w;
        FRT_TRY(frt_cuda_attn_prep(st, c->q, c->gated ? c->zg : NULL, kc, vc, c->t0, W, c->t0 + c->qw, W,
                                   c->t0 + c->qw + c->kvw, W, lw->q_norm, lw->k_norm, f->d_pos, f->d_n, R,
                                   m->max_seq, nh, nkv, hd, c->rot, c->theta, c->eps, 1, c->gated));
    } else {
        FRT_TRY(prep_unfused(f, l, r));
        FRT_TRY(frt_cuda_kv_append(st, kc, vc, c->k, c->v, F32, f->d_pos, f->d_n, R, m->max_seq, nkv, hd));
    }
    if (f->decode)
        return frt_cuda_attention(st, c->o, F32, c->q, F32, kc, vc, f->d_pos, f->d_n, R, m->max_seq, nh, nkv, hd,
                                  c->scale, DECODE_SPLIT, c->attn_ws, c->attn_ws_bytes);
    return attn_prefill(f, r, kc, vc, NULL, NULL);
}

/* Full attention (Qwen3_5Attention) of the normed input c->h into c->delta;
 * decode: of rmsnorm(c->x, input_ln), added into c->x. */
static int attention_block(const fwd *f, int l)
{
    cu_model *c = f->c;
    const cu_layer *lw = &c->layers[l];
    void *st = f->st;
    int R = f->R;

    if (f->decode) { /* input_ln + q | gate, k, v in one GEMV launch (the same bits as 1 + 3) */
        const prod p[3] = {{c->t0, lw->q_proj, c->qw}, {c->k, lw->k_proj, c->kvw}, {c->v, lw->v_proj, c->kvw}};
        const frt_cuda_gemv_norm nm = resid_norm(f, lw->input_ln);
        FRT_TRY(gemv_products(f, p, 3, NULL, &nm, R));
    } else if (f->at_one) {
        /* one GEMM over the weights lying end to end: t0 [R, q | gate per head, k, v], which the
         * prep reads in place (FP8: codes and scales end to end too, qwen35_cuda_load.c) */
        FRT_TRY(h_fp8(f, l > 0));
        FRT_TRY(lin(f, c->t0, c->h, lw->q_proj, c->H, c->at_w));
    } else {
        FRT_TRY(h_fp8(f, l > 0)); /* FP8 prefill: h quantized once for q, k, v */
        FRT_TRY(lin(f, c->t0, c->h, lw->q_proj, c->H, c->qw)); /* [R, nh, (q | gate)] */
        FRT_TRY(lin(f, c->k, c->h, lw->k_proj, c->H, c->kvw));
        FRT_TRY(lin(f, c->v, c->h, lw->v_proj, c->H, c->kvw));
    }
    const attn_rows r = {st, R, f->decode, f->d_pos, f->d_n, c->t0, c->v, c->k, c->q, c->zg, c->o, c->attn_ws};
    FRT_TRY(c->fp8 ? attention_fp8(f, l, &r) : attention_bf16(f, l, &r));
    if (c->gated) /* the output gate and the bf16 rounding in one launch */
        FRT_TRY(frt_cuda_sigmoid_mul_to(st, c->ob, BF16, c->o, F32, c->zg, F32, f->d_n, R, c->ad));
    else
        FRT_TRY(frt_cuda_convert(st, c->ob, BF16, c->o, F32, f->d_n, R, c->ad));
    return gemm_out(f, c->ob, lw->o_proj, c->ad);
}

/* Gated DeltaNet (Qwen3_5GatedDeltaNet) of c->h into c->delta; decode: of
 * rmsnorm(c->x, input_ln), added into c->x. */
static int deltanet_block(const fwd *f, int l)
{
    frt_model *m = f->m;
    cu_model *c = f->c;
    const cu_layer *lw = &c->layers[l];
    void *st = f->st;
    int R = f->R, nk = c->nk, nv = c->nv, dk = c->dk, dv = c->dv, ch = c->ch, kd = c->kd, vd = c->vd;
    float *state = frt_buffer_ptr(qwen35_of(m)->gdn_state[l]), *conv = frt_buffer_ptr(qwen35_of(m)->gdn_conv[l]);

    if (f->decode) { /* input_ln + qkv, z, b, a in one GEMV launch; b and a straight into their buffers */
        const prod p[4] = {{c->t0, lw->in_proj_qkv, ch},
                           {c->zg, lw->in_proj_z, vd},
                           {c->b, lw->in_proj_ba, nv},
                           {c->a, lin_rows(lw->in_proj_ba, (size_t)nv, (size_t)c->H), nv}};
        const frt_cuda_gemv_norm nm = resid_norm(f, lw->input_ln);
        FRT_TRY(gemv_products(f, p, 4, NULL, &nm, R));
    } else if (f->dn_one) {
        /* one GEMM over the weights lying end to end: t0 [R, ch | vd | ba_w];
         * the conv and the gated norm read their columns in place (below) */
        FRT_TRY(h_fp8(f, l > 0));
        FRT_TRY(lin(f, c->t0, c->h, lw->in_proj_qkv, c->H, c->dn_w));
    } else {
        FRT_TRY(h_fp8(f, l > 0)); /* FP8 prefill: h quantized once for qkv, z, b | a */
        FRT_TRY(lin(f, c->t0, c->h, lw->in_proj_qkv, c->H, ch));
        FRT_TRY(lin(f, c->zg, c->h, lw->in_proj_z, c->H, vd));
        FRT_TRY(lin(f, c->ba, c->h, lw->in_proj_ba, c->H, c->ba_w));
    }
    if (f->decode && (dk == 64 || dk == 128) && (dv == 64 || dv == 128) && nv / nk <= 8 && c->K <= 4) {
        /* conv + L2 norms + gates + the recurrent rule + the gated norm: one launch (gdn_decode.cu) */
        FRT_TRY(frt_cuda_gdn_decode(st, c->ob, BF16, state, conv, NULL, c->t0, F32, lw->conv1d, c->zg, c->a, c->b,
                                    lw->A_log, lw->dt_bias, lw->gdn_norm, f->d_n, nk, nv, dk, dv, c->K, c->eps));
        return gemm_out(f, c->ob, lw->out_proj, vd);
    }
    /* the conv reads its ch columns in place and writes q, k, v apart */
    const int x_stride = f->dn_one ? c->dn_w : ch;
    void *const qkv[3] = {c->q, c->k, c->v};
    const int widths[3] = {kd, kd, vd};
    /* ... and L2-normalises the q and k heads on the way when their layout allows (blocks of 256
     * channels, dk a multiple of 32 dividing 256), else frt_cuda_l2norm after it */
    int rc = frt_cuda_conv1d_causal_split(st, qkv, widths, 3, F32, c->t0, F32, x_stride, conv, lw->conv1d, f->d_n,
                                          R, ch, c->K, 2 * kd, dk, 1e-6f);
    const int l2_fused = rc != FRT_ERR_UNSUPPORTED;
    if (!l2_fused)
        rc = frt_cuda_conv1d_causal_split(st, qkv, widths, 3, F32, c->t0, F32, x_stride, conv, lw->conv1d, f->d_n,
                                          R, ch, c->K, 0, 0, 0.0f);
    FRT_TRY(rc);
    if (!l2_fused) {
        FRT_TRY(frt_cuda_l2norm(st, c->q, F32, f->d_n, R, nk, dk, 1e-6f));
        FRT_TRY(frt_cuda_l2norm(st, c->k, F32, f->d_n, R, nk, dk, 1e-6f));
    }
    if (f->decode) /* the GEMV wrote b and a to their buffers */
        FRT_TRY(frt_cuda_gdn_gate(st, c->g, c->beta, c->a, c->b, F32, lw->A_log, lw->dt_bias, f->d_n, R, nv));
    else if (f->dn_one) /* b, a read in place: columns ch + vd .. of the fused output */
        FRT_TRY(frt_cuda_gdn_gate_strided(st, c->g, c->beta, c->t0 + ch + vd + nv, c->t0 + ch + vd, F32, c->dn_w,
                                          lw->A_log, lw->dt_bias, f->d_n, R, nv));
    else /* b, a read in place from ba [R, ba_w] */
        FRT_TRY(frt_cuda_gdn_gate_strided(st, c->g, c->beta, c->ba + nv, c->ba, F32, c->ba_w, lw->A_log,
                                          lw->dt_bias, f->d_n, R, nv));
    if (f->decode)
        FRT_TRY(frt_cuda_gdr_recurrent(st, c->o, F32, state, c->q, c->k, c->v, F32, c->g, c->beta, f->d_n, R, nk,
                                       nv, dk, dv));
    else
        FRT_TRY(frt_cuda_gdr_chunked(st, c->o, F32, state, c->q, c->k, c->v, F32, c->g, c->beta, f->d_n, R, nk,
                                     nv, dk, dv, GDR_CHUNK, c->gdr_ws, c->gdr_ws_bytes));
    if (f->dn_one) /* z read in place from the fused output */
        FRT_TRY(frt_cuda_rmsnorm_gated_strided(st, c->ob, BF16, c->o, F32, c->t0 + ch, F32, c->dn_w, lw->gdn_norm,
                                               f->d_n, R, nv, dv, c->eps));
    else
        FRT_TRY(frt_cuda_rmsnorm_gated(st, c->ob, BF16, c->o, F32, c->zg, F32, lw->gdn_norm, f->d_n, R, nv, dv,
                                       c->eps));
    return gemm_out(f, c->ob, lw->out_proj, vd);
}

/* SwiGLU MLP (Qwen3_5MLP) of c->h into c->delta; decode: of rmsnorm(c->x,
 * post_ln), added into c->x. */
static int mlp_block(const fwd *f, int l)
{
    cu_model *c = f->c;
    const cu_layer *lw = &c->layers[l];
    if (f->decode) { /* post_ln, gate, up and SwiGLU in one GEMV launch */
        const frt_cuda_gemv_norm nm = resid_norm(f, lw->post_ln);
        FRT_TRY(swiglu_products(f, lw, c->ob, NULL, &nm, f->R));
    } else if (c->wfp8 && c->mlp_acc) { /* FP8: unscaled accumulators, the scales applied by their consumers */
        FRT_TRY(h_fp8(f, 1));
        FRT_TRY(frt_cuda_gemm_fp8_mlp(c->gemm8, f->st, c->xq, c->xs, (uint16_t *)c->t0, (uint16_t *)c->t1, c->delta,
                                      lw->gate_proj.q, lw->gate_proj.s, lw->up_proj.q, lw->up_proj.s, lw->down_proj.q,
                                      f->R, c->H, c->I));
        return 0; /* delta: down's accumulator, scaled by the add_norm after it (mlp_acc_scales) */
    } else if (!c->wfp8 && frt_cuda_gemm_swiglu_ok(c->gemm, f->R, c->H, c->I, F32)) { /* an append bucket: one launch */
        FRT_TRY(frt_cuda_gemm_swiglu(c->gemm, f->st, c->ob, c->h, lw->gate_proj.w, lw->up_proj.w, f->R, c->H, c->I, F32));
    } else {
        FRT_TRY(h_fp8(f, 1)); /* FP8 prefill: h quantized once for gate and up */
        FRT_TRY(lin(f, c->t0, c->h, lw->gate_proj, c->H, c->I));
        FRT_TRY(lin(f, c->t1, c->h, lw->up_proj, c->H, c->I));
        FRT_TRY(frt_cuda_swiglu(f->st, c->ob, BF16, c->t0, c->t1, F32, f->d_n, f->R, c->I));
    }
    return gemm_out(f, c->ob, lw->down_proj, c->I);
}

/* The weight scales of layer l's down_proj when its prefill mlp_block
 * leaves the FP8 accumulator in c->delta (wfp8 with mlp_acc), else NULL. */
static const float *mlp_acc_scales(const cu_model *c, int l)
{
    return c->wfp8 && c->mlp_acc ? c->layers[l].down_proj.s : NULL;
}

/* Prefill: the residual add of c->delta fused with the norm of w into out;
 * acc_sw: delta is an FP8 accumulator of these weight scales (and c->xs's
 * token scales). With FP8 weights, out h is quantized in the same launch
 * into c->xq / c->xs (frt_cuda_add_rmsnorm_quant; c->xs in place: row t's
 * token scale is read before its new one is written), the input of the
 * products after it (h_fp8); h itself is not stored then (the FP8
 * products read only the codes). */
static int add_norm(const fwd *f, void *out, frt_cuda_dtype out_dt, const float *w, const float *acc_sw)
{
    cu_model *c = f->c;
    if (c->wfp8 && out == c->h)
        return frt_cuda_add_rmsnorm_quant(f->st, c->x, c->delta, F32, acc_sw ? c->xs : NULL, acc_sw, NULL, c->xq,
                                          c->xs, w, f->d_n, f->R, c->H, c->eps, 1);
    if (acc_sw)
        return frt_cuda_add_rmsnorm_fp8acc(f->st, c->x, c->delta, c->xs, acc_sw, out, out_dt, w, f->d_n, f->R, c->H,
                                           c->eps, 1);
    return frt_cuda_add_rmsnorm(f->st, c->x, c->delta, F32, out, out_dt, w, f->d_n, f->R, c->H, c->eps, 1);
}

/* One forward step (task_embed, task_layer x L, task_final of the cpu
 * backend): the journal, the embedding, the layers, the final norm, the
 * logits of the last valid row, and the boundary advance. Prefill: each norm
 * is a launch of its own (the first rmsnorm, then add_rmsnorm fusing the
 * residual add of delta with the next norm). Decode: no norm launch inside
 * the layers (the mixer and MLP GEMVs normalise c->x in their prologue, the
 * output projections accumulate into c->x: the same residual bits), one
 * rmsnorm for the final norm. */
static int record_forward(const fwd *f)
{
    frt_model *m = f->m;
    cu_model *c = f->c;
    const frt_model_config *cfg = &m->cfg;
    void *st = f->st;
    int R = f->R, H = c->H;
    const int32_t *ids = f->decode ? f->d_pending : (const int32_t *)frt_buffer_ptr(m->in_ids);

    if (f->pieces > 1) /* the pieces' starts, for the group's attention */
        FRT_TRY(frt_group_pos(st, c->gpos, f->d_pos, f->pieces, m->C, c->attn_pieces));
    FRT_TRY(frt_qwen35_journal(st, frt_buffer_ptr(m->tokens), ids, f->d_pos, f->d_n, R, m->max_seq,
                               frt_buffer_ptr(m->seen), f->decode ? frt_buffer_ptr(m->counts) : NULL));
    FRT_TRY(frt_cuda_embedding(st, c->x, F32, c->embed, c->V, H, ids, f->d_n, R));
    FRT_TRY(debug_copy(f, 0, c->x));
    if (!f->decode)
        FRT_TRY(frt_cuda_rmsnorm(st, c->h, BF16, c->x, F32, c->layers[0].input_ln, f->d_n, R, 1, H, c->eps, 1));
    for (int l = 0; l < c->L; l++) {
        const cu_layer *lw = &c->layers[l];
        if (!f->decode) FRT_TRY(frt_model_layer_wait(f->s, m, l, R)); /* the pipelined restore's layer l */
        if (cfg->layer_types[l] == FRT_LAYER_FULL_ATTENTION)
            FRT_TRY(attention_block(f, l));
        else
            FRT_TRY(deltanet_block(f, l));
        if (!f->decode) FRT_TRY(add_norm(f, c->h, BF16, lw->post_ln, NULL));
        FRT_TRY(mlp_block(f, l)); /* decode: down_proj added into c->x */
        if (!f->decode && l + 1 < c->L)
            FRT_TRY(add_norm(f, c->h, BF16, c->layers[l + 1].input_ln, mlp_acc_scales(c, l)));
        else if (!f->decode) /* the last layer's residual add fused with the final norm */
            FRT_TRY(add_norm(f, c->hf, F32, c->final_norm, mlp_acc_scales(c, l)));
        FRT_TRY(debug_copy(f, l + 1, c->x));
    }
    if (f->decode) /* the final norm of the residual: the LM head's input */
        FRT_TRY(frt_cuda_rmsnorm(st, c->hf, F32, c->x, F32, c->final_norm, f->d_n, R, 1, H, c->eps, 1));
    FRT_TRY(debug_copy(f, c->L + 1, c->hf));
    FRT_TRY(frt_cuda_last_row(st, c->last, BF16, c->hf, F32, f->d_n, R, H));
    /* the logits (a prefill's: on the call's last piece only, f->d_no_logits) */
    FRT_TRY(frt_lm_head_cuda_run(&c->head, c->gemm, st, f->d_no_logits, frt_buffer_ptr(m->logits), c->last, 1, H,
                                 c->V));
    return frt_qwen35_advance(st, f->d_pos, f->d_pending, f->d_has_logits, c->debug ? c->debug_rows : NULL,
                              f->d_n, f->d_no_logits, R);
}

/* Samples pending from the logits (task_sample): the sampling step of
 * frt/sampling.h (frt_cuda_sample_step: bias and penalties, argmax when the
 * step's temperature is <= 0 (the RNG untouched), frt_cuda_sample
 * otherwise, logprobs when asked). The sampler is one cooperative launch: a
 * greedy step is one pass over the logits, no sort. */
static int record_sample_work(const fwd *f)
{
    frt_model *m = f->m;
    cu_model *c = f->c;
    const float *logits = frt_buffer_ptr(m->logits);
    return frt_cuda_sample_step(f->st, f->d_pending, logits, c->V, f->d_params, frt_buffer_ptr(m->counts),
                                frt_buffer_ptr(m->seen), f->d_mask_on, frt_buffer_ptr(m->in_mask), f->d_rng,
                                frt_buffer_ptr(m->out_logprobs), c->sample_ws, c->sample_ws_bytes);
}

/* ---- the batched decode of branch slots (frt/branch.h) --------------------
 *
 * One graph decodes slots 0..n-1 together (as dense_cuda.c's): the
 * weight-bound products run on all n rows, through the plain GEMVs in groups
 * of batch_g (<= FRT_CUDA_GEMV_MAX_N) rows after one rmsnorm launch over the rows
 * (the _norm GEMVs' prologue is the same bits as that rmsnorm), and the rest
 * per slot on its own state: the journal and embedding, the attention prep,
 * KV append and flash-decoding over its own cache, the fused Gated DeltaNet
 * step on its own recurrent and conv state, its logits, the advance and its
 * sampler. The per-slot work runs on one side stream a slot (batch_cuda.h:
 * parallel branches of the graph between a fork and a join), each slot's
 * attention on its own split workspace. Every kernel is row-wise or, for the GEMV, splits a row as it
 * does alone (gemv.cu), so a branch gets the bits of its decode alone
 * (tests/test_fork.c, fork_cuda). Only for the fused Gated DeltaNet step's
 * shapes (dk, dv 64 / 128, nv / nk <= 8, conv <= 4): otherwise
 * FRT_ERR_UNSUPPORTED and the runtime steps the slots one after another. */

#define BATCH_G (c->batch_g) /* every use has the model c in scope */
#define GROUPS(r0, g, n) for (int r0 = 0, g; r0 < (n) && (g = (n) - r0 < BATCH_G ? (n) - r0 : BATCH_G); r0 += g)

/* rmsnorm(c->x, w) (zero-centred) of the n rows into c->h (bf16). */
static int b_norm(const fwd *fa, const float *w)
{
    cu_model *c = fa->c;
    return frt_cuda_rmsnorm(fa->st, c->h, BF16, c->x, F32, w, NULL, fa->R, 1, c->H, c->eps, 1);
}

/* Rows r0 .. r0+g-1: y = act . w^T added into the residual c->x. */
static int b_out(const fwd *fa, const uint16_t *act, int in, cu_lin w, int r0, int g)
{
    cu_model *c = fa->c;
    return resid_add(fa, c->x + (size_t)r0 * c->H, act + (size_t)r0 * in, w, g, in);
}

static int b_attention(const fwd *fa, const fwd *fb, int l)
{
    frt_model *m = fa->m;
    cu_model *c = fa->c;
    const cu_layer *lw = &c->layers[l];
    int n = fa->R;
    FRT_TRY(b_norm(fa, lw->input_ln));
    GROUPS(r0, g, n) {
        const prod p[3] = {{c->t0 + (size_t)r0 * c->qw, lw->q_proj, c->qw},
                           {c->k + (size_t)r0 * c->kvw, lw->k_proj, c->kvw},
                           {c->v + (size_t)r0 * c->kvw, lw->v_proj, c->kvw}};
        FRT_TRY(gemv_products(fa, p, 3, c->h + (size_t)r0 * c->H, NULL, g));
    }
    /* each slot's prep and attention on its side stream, its own workspace */
    FRT_TRY(frt_cuda_fanout_fork(&c->ends.fan, fa->st, n));
    for (int b = 0; b < n; b++) {
        FRT_TRY(frt_model_bind_slot(m, b));
        void *st = c->ends.fan.side[b], *ws = (char *)c->attn_ws + (size_t)b * c->attn_ws_bytes;
        uint16_t *kc = frt_buffer_ptr(qwen35_of(m)->kv_k[l]), *vc = frt_buffer_ptr(qwen35_of(m)->kv_v[l]);
        float *q = c->q + (size_t)b * c->ad, *zg = c->gated ? c->zg + (size_t)b * c->ad : NULL;
        if (c->fp8) { /* the slot's rows through the path of its decode alone (the same bits) */
            const attn_rows r = {st, 1, 1, fb[b].d_pos, NULL, c->t0 + (size_t)b * c->qw, c->v + (size_t)b * c->kvw,
                                 c->k + (size_t)b * c->kvw, q, zg, c->o + (size_t)b * c->ad, ws};
            FRT_TRY(attention_fp8(fa, l, &r));
            continue;
        }
        FRT_TRY(frt_cuda_attn_decode_prep(st, q, zg, kc, vc, c->t0 + (size_t)b * c->qw, c->k + (size_t)b * c->kvw,
                                          c->v + (size_t)b * c->kvw, lw->q_norm, lw->k_norm, fb[b].d_pos, NULL,
                                          m->max_seq, c->nh, c->nkv, c->hd, c->rot, c->theta, c->eps, 1, c->gated));
        FRT_TRY(frt_cuda_attention(st, c->o + (size_t)b * c->ad, F32, q, F32, kc, vc, fb[b].d_pos, NULL, 1,
                                   m->max_seq, c->nh, c->nkv, c->hd, c->scale, DECODE_SPLIT, ws, c->attn_ws_bytes));
    }
    FRT_TRY(frt_cuda_fanout_join(&c->ends.fan, fa->st, n));
    if (c->gated)
        FRT_TRY(frt_cuda_sigmoid_mul_to(fa->st, c->ob, BF16, c->o, F32, c->zg, F32, NULL, n, c->ad));
    else
        FRT_TRY(frt_cuda_convert(fa->st, c->ob, BF16, c->o, F32, NULL, n, c->ad));
    GROUPS(r0, g, n) FRT_TRY(b_out(fa, c->ob, c->ad, lw->o_proj, r0, g));
    return 0;
}

static int b_deltanet(const fwd *fa, const fwd *fb, int l)
{
    frt_model *m = fa->m;
    cu_model *c = fa->c;
    const cu_layer *lw = &c->layers[l];
    int n = fa->R, nv = c->nv;
    FRT_TRY(b_norm(fa, lw->input_ln));
    GROUPS(r0, g, n) {
        const prod p[4] = {{c->t0 + (size_t)r0 * c->ch, lw->in_proj_qkv, c->ch},
                           {c->zg + (size_t)r0 * c->vd, lw->in_proj_z, c->vd},
                           {c->b + (size_t)r0 * nv, lw->in_proj_ba, nv},
                           {c->a + (size_t)r0 * nv, lin_rows(lw->in_proj_ba, (size_t)nv, (size_t)c->H), nv}};
        FRT_TRY(gemv_products(fa, p, 4, c->h + (size_t)r0 * c->H, NULL, g));
    }
    /* each slot's Gated DeltaNet step on its side stream (its own state) */
    FRT_TRY(frt_cuda_fanout_fork(&c->ends.fan, fa->st, n));
    for (int b = 0; b < n; b++) {
        FRT_TRY(frt_model_bind_slot(m, b));
        float *state = frt_buffer_ptr(qwen35_of(m)->gdn_state[l]), *conv = frt_buffer_ptr(qwen35_of(m)->gdn_conv[l]);
        FRT_TRY(frt_cuda_gdn_decode(c->ends.fan.side[b], c->ob + (size_t)b * c->vd, BF16, state, conv, NULL,
                                    c->t0 + (size_t)b * c->ch, F32, lw->conv1d, c->zg + (size_t)b * c->vd,
                                    c->a + (size_t)b * nv, c->b + (size_t)b * nv, lw->A_log, lw->dt_bias, lw->gdn_norm,
                                    NULL, c->nk, nv, c->dk, c->dv, c->K, c->eps));
    }
    FRT_TRY(frt_cuda_fanout_join(&c->ends.fan, fa->st, n));
    GROUPS(r0, g, n) FRT_TRY(b_out(fa, c->ob, c->vd, lw->out_proj, r0, g));
    return 0;
}

static int b_mlp(const fwd *fa, int l)
{
    cu_model *c = fa->c;
    const cu_layer *lw = &c->layers[l];
    FRT_TRY(b_norm(fa, lw->post_ln));
    GROUPS(r0, g, fa->R) {
        FRT_TRY(swiglu_products(fa, lw, c->ob + (size_t)r0 * c->I, c->h + (size_t)r0 * c->H, NULL, g));
        FRT_TRY(b_out(fa, c->ob, c->I, lw->down_proj, r0, g));
    }
    return 0;
}

static int record_batch(frt_stream *s, frt_model *m, int n, fwd *fb)
{
    cu_model *c = m->bk_data;
    fwd fa = fwd_make(s, m, n, 1); /* the rows of every slot (its boundary pointers are unused) */
    for (int b = 0; b < n; b++) {
        FRT_TRY(frt_model_bind_slot(m, b));
        fb[b] = fwd_make(s, m, 1, 1);
    }
    FRT_TRY(frt_batch_ends_start(&c->ends, m, fa.st, n, c->x, c->embed, c->H));
    for (int l = 0; l < c->L; l++) {
        if (m->cfg.layer_types[l] == FRT_LAYER_FULL_ATTENTION)
            FRT_TRY(b_attention(&fa, fb, l));
        else
            FRT_TRY(b_deltanet(&fa, fb, l));
        FRT_TRY(b_mlp(&fa, l));
    }
    FRT_TRY(frt_cuda_rmsnorm(fa.st, c->hf, F32, c->x, F32, c->final_norm, NULL, n, 1, c->H, c->eps, 1));
    FRT_TRY(frt_cuda_convert(fa.st, c->h, BF16, c->hf, F32, NULL, n, c->H));
    GROUPS(r0, g, n)
        FRT_TRY(frt_lm_head_cuda_run(&c->head, c->gemm, fa.st, NULL, c->blogits + (size_t)r0 * c->V,
                                     c->h + (size_t)r0 * c->H, g, c->H, c->V));
    return frt_batch_ends_finish(&c->ends, m, fa.st, n);
}

static int cu_record_decode_batch(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    frt_model *m = rc->m;
    cu_model *c = m->bk_data;
    int n = rc->bucket;
    if (!c->batch_slots)
        return frt_error(FRT_ERR_UNSUPPORTED, "cuda model: no batched decode for these shapes (a product is not a "
                                              "GEMV, or the Gated DeltaNet step is not the fused one)");
    if (n < 2 || n > c->batch_slots)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "cuda model: batch of %d slots outside [2, %d]", n, c->batch_slots);
    fwd *fb = malloc((size_t)n * sizeof *fb);
    if (!fb) return frt_error(FRT_ERR_OUT_OF_MEMORY, "cuda model: out of memory");
    int err = record_batch(s, m, n, fb);
    free(fb);
    return err;
}

static int cu_record_prefill(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    FRT_TRY(frt_group_bucket_check(rc->m, rc->bucket, "cuda model"));
    fwd f = fwd_make(s, rc->m, rc->bucket, 0);
    return record_forward(&f);
}

static int cu_record_decode(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    fwd f = fwd_make(s, rc->m, 1, 1);
    FRT_TRY(record_forward(&f));
    return record_sample_work(&f);
}

static int cu_record_sample(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    fwd f = fwd_make(s, rc->m, 1, 0);
    return record_sample_work(&f);
}

static int cu_debug_hidden(frt_model *m, int idx, float *out, int n)
{
    cu_model *c = m->bk_data;
    if (!c || !c->debug) return frt_error(FRT_ERR_STATE, "debug_hidden: not enabled (params.debug_hidden)");
    int32_t rows = 0;
    FRT_TRY(frt_buffer_read(c->sbuf, c->debug_rows_off, &rows, sizeof rows, m->stream));
    FRT_TRY(frt_stream_sync(m->stream));
    if (idx < 0 || idx > c->L + 1 || n < 1 || n > rows)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "debug_hidden: index %d rows %d out of range (%d rows recorded)", idx,
                         n, rows);
    size_t H = (size_t)c->H;
    size_t off = c->debug_off + (size_t)idx * (size_t)m->C * H * sizeof(float);
    FRT_TRY(frt_buffer_read(c->sbuf, off, out, (size_t)n * H * sizeof(float), m->stream));
    return frt_stream_sync(m->stream);
}

const frt_arch_backend frt_qwen35_cuda_backend = {
    .name = "cuda",
    .kv_dtype = FRT_DT_BF16,
    .state_dtypes = "weights=bf16,norms=f32,kv=bf16,gdn=f32,conv=f32,resid=f32,gemm=cublaslt-bf16-f32acc,decode=gemv-fused-3,"
                    "attn_split=half-1",
    .state_dtypes_kv_fp8 = "weights=bf16,norms=f32,kv=f8_e4m3-satfinite,kv_scale=per-head-static,gdn=f32,conv=f32,"
                           "resid=f32,gemm=cublaslt-bf16-f32acc,decode=gemv-fused-3,attn_fp8=tc-widen-bf16-1,prep_fp8=fused-1,"
                           "attn_split=half-1",
    .weights_fp8 = 1, /* FP8 Linear weights: E4M3 GEMV (decode), cuBLASLt FP8 GEMM (prefill); m->weights_desc */
    .lm_head_fp8 = 1, /* c->head: the E4M3 GEMV (lm_head_cuda.c) */
    .load_weights = frt_qwen35_cu_load_weights,
    .alloc_scratch = frt_qwen35_cu_alloc_scratch,
    .free = frt_qwen35_cu_free,
    .record_prefill = cu_record_prefill,
    .prefill_group = frt_qwen35_cu_prefill_group,
    .record_decode = cu_record_decode,
    .record_sample = cu_record_sample,
    .record_decode_batch = cu_record_decode_batch,
    .debug_hidden = cu_debug_hidden,
    .fingerprint_extra = frt_qwen35_cu_fingerprint_extra,
    .gemm_autotune = 1, /* the append plans, below C (frt_gemm_tune_appends) */
    .layer_waits = 1,
};
