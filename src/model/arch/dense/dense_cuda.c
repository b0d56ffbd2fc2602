/*
 * arch/dense/dense_cuda.c - the dense family's forward pass on the cuda
 * backend, bf16: the same function, step for step, as dense_cpu.c (whose
 * header names the math source), launched as kernels/cuda kernels (and the
 * two of dense_glue.cu: bias, RoPE from the llama3 / default table) on the
 * model's stream and captured into CUDA graphs once at load: one prefill
 * variant per length bucket, one decode graph for every position, sample.
 *
 * Storage and precision (as the hybrid's qwen35_cuda.c):
 *   weights      bf16 matrices in one device allocation ("cuda.weights");
 *                norm weights, biases and the RoPE table f32. A tied lm_head
 *                is the embedding. params.lm_head_dtype FRT_WEIGHT_FP8: the
 *                lm_head (a tied one: a copy) as E4M3 codes with one scale a
 *                vocabulary row, run by the E4M3 GEMV (c->head, lm_head_cuda.h).
 *   activations  residual stream f32; GEMM inputs bf16 (normed hidden,
 *                attention output, SwiGLU output); GEMM outputs f32
 *                (cuBLASLt or the GEMV, fp32 accumulation), except a
 *                prefill's gate and up (bf16, the SwiGLU's input; f32 from
 *                the FP8 GEMM).
 *   state        KV cache bf16 (kv_dtype), declared by dense.c; with
 *                params.kv_dtype FRT_KV_FP8 E4M3 codes with static per-head
 *                scales (a calibration file's, or 1.0): the append quantizes
 *                (frt_dense_prefill_prep_fp8, frt_dense_decode_prep_fp8 and
 *                _batch_fp8: RoPE and the append in one launch),
 *                attention runs on tensor cores
 *                over the codes widened to bf16 (frt_cuda_attention_prefill_fp8
 *                for prefill, frt_cuda_attention_fp8's decode kernel and
 *                frt_cuda_attention_batch_fp8 for the batched decode;
 *                docs/fp8.md).
 *
 * Graphs: every value that changes between replays is read from device
 * memory (boundary.pos, step.n_valid, boundary.pending, step.sampling,
 * boundary.rng); GEMMs run on all rows of a bucket, every other kernel on
 * the first n_valid rows only. The boundary record is advanced on the device
 * by the hybrid's end-of-step kernels (qwen35_glue.h: the journal and the
 * advance are architecture-neutral). GEMM plans are made at load.
 *
 * Decode uses the hybrid's fused GEMVs (kernels_cuda.h; with FP8 weights
 * their E4M3 forms, gemv_fp8.h): the input norm and
 * q | k | v in one launch, the post-attention norm, gate, up and SwiGLU in
 * one, and the output projections accumulate into the residual stream (no
 * norm launch inside the layers). Prefill runs each product as its own
 * GEMM (no fused q | k | v GEMM yet; docs/PERF.md), RoPE and the KV append
 * in one launch (frt_dense_prefill_prep), and whole pieces in groups of up
 * to m->G per replay (cd_prefill_group, docs/architectures.md "Prefill
 * groups").
 *
 * Limits (FRT_ERR_UNSUPPORTED at load, with the reason): hidden_size,
 * intermediate_size, vocab_size, n_heads * head_dim and n_kv_heads *
 * head_dim multiples of 8 (cuBLASLt rows 16-byte aligned); head_dim a
 * multiple of 32 up to 256 (the CUDA attention).
 */
#include "model/arch/dense/dense.h"
#include "model/arch/batch_cuda.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm_fp8.h"
#include "kernels/cuda/gemv_fp8.h"
#include "model/arch/lm_head_cuda.h"
#include "kernels/cuda/kernels_cuda.h"
#include "model/arch/dense/dense_glue.h"
#include "model/arch/group_cuda.h"
#include "model/arch/qwen35/qwen35_glue.h"
#include "model/kv_scales.h"
#include "util/bf16.h"
#include "util/error.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32 FRT_CUDA_F32
#define BF16 FRT_CUDA_BF16
#define ALIGN 256
#define DECODE_SPLIT 128
#define GEMM_WORKSPACE (32u << 20)
#define BATCH_MAX 32 /* the most branch slots one batched decode graph takes */

/* Device pointers of one layer (into the weight arena); NULL where absent. */
typedef struct cd_layer {
    const float *input_ln, *post_ln;            /* [H] */
    const uint16_t *q_proj, *k_proj, *v_proj;   /* [qd, H], [kvd, H] x 2 */
    const uint16_t *o_proj;                     /* [H, qd] */
    const float *q_bias, *k_bias, *v_bias;      /* [qd], [kvd] x 2 */
    const float *o_bias;                        /* [H] */
    const float *q_norm, *k_norm;               /* [hd] */
    const uint16_t *gate_proj, *up_proj;        /* [I, H] */
    const uint16_t *down_proj;                  /* [H, I] */
} cd_layer;

/* FP8 weights (c->wfp8): a Linear weight as E4M3 codes [out, in] and its f32
 * scales, one per output channel [out], or (c->wblk) one per 128 x 128
 * block [ceil(out / 128), ceil(in / 128)]; device pointers into the weight
 * arena. */
typedef struct cd_fp8 {
    const uint8_t *w;
    const float *s;
} cd_fp8;

/* A layer's Linear weights in FP8 (the cd_layer matrices are NULL then). */
typedef struct cd_layer8 {
    cd_fp8 q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj;
} cd_layer8;

typedef struct cd_model {
    int H, I, V, L, nh, nkv, hd, qd, kvd;
    float eps, scale;
    frt_buffer *wbuf;
    const uint16_t *embed;
    frt_lm_head_cuda head; /* bf16 (a tied one: embed), or with params.lm_head_dtype FRT_WEIGHT_FP8 E4M3 codes and
                              per-row scales (frt_fp8w_lm_head_put) */
    const float *final_norm, *inv_freq;
    cd_layer *layers;
    cd_layer8 *layers8; /* [L] with FP8 weights (wfp8), else NULL */
    int wfp8;           /* the Linear weights are E4M3 + per-channel scales (docs/fp8.md) */
    int qkv_one;        /* prefill: q | k | v as one GEMM into t0 [R, qd + 2 kvd] (bf16 weights lying end to
                           end: qkv_fused), the prep reading it in place */
    int resid_gemm;     /* prefill: o_proj and down_proj add into the residual x in the GEMM's epilogue
                           (beta 1; bf16 weights without an o_proj bias), the next norm a plain RMSNorm;
                           else they write delta and add_rmsnorm adds it */
    int wblk;           /* wfp8 with 128 x 128 block scales (a block-wise checkpoint): decode through the
                           _b128 GEMVs, prefill through a bf16 GEMM over the weight dequantized into wdq */
    uint16_t *wdq;      /* wblk: [max(qd, kvd, I) * H] bf16, one Linear weight dequantized (prefill) */
    uint16_t *q16;      /* prefill with a head_dim the FlashAttention kernels take (64, 128, 256): the preps'
                           roped q in bf16 [R, qd], the attention's input (the bits of the f32 q, which the
                           kernels round to bf16 as they stage it); NULL otherwise (f32 q) */
    uint8_t *xq;        /* wfp8: [C, max(H, I, qd)] a prefill Linear input quantized per token (E4M3) */
    float *xs;          /* wfp8: [C] its per-token scales */
    int mlp_acc;        /* wfp8 (not wblk): gate, up and down run as unscaled FP8 accumulators
                           (frt_cuda_gemm_fp8_mlp: gate / up bf16, down f32) whose consumers apply the
                           scales (frt_cuda_swiglu_fp8acc_quantize, frt_cuda_add_rmsnorm_fp8acc) */
    frt_cuda_gemm_fp8 *gemm8; /* wfp8: the FP8 prefill GEMM plans (on top of gemm) */
    char wdesc[256];    /* wfp8: m->weights_desc: frt_fp8w_desc + the prefill GEMM */
    frt_cuda_gemm *gemm;
    int tuned; /* params.gemm_autotune ran (or loaded its file) on the append plans */
    frt_buffer *sbuf;
    float *x, *hf, *q, *k, *v, *t0, *t1, *delta;
    uint16_t *h, *last, *ob;
    float *blogits;  /* [batch_slots, V]: the batched decode's logits rows */
    int batch_slots; /* the most slots one batched decode graph takes; 0: none */
    int batch_g;     /* rows per GEMV group of the batched decode (2 .. FRT_CUDA_GEMV_MAX_N) */
    /* Device tables of the batched decode (cd_slots_ready): per layer l the
     * K and V caches of slots 0..batch_slots-1 (tab_k + l * batch_slots; E4M3
     * codes with the FP8 KV cache, read through casts), and
     * each slot's boundary position. */
    uint16_t **tab_k, **tab_v;
    int32_t **tab_pos;
    int32_t *tab_shared; /* [batch_slots]: the fork's shared KV rows per slot (cd_shared_rows) */
    frt_batch_ends ends; /* the batched decode's per-slot starts and ends (batch_cuda.h) */
    void *ends_ws;
    size_t ends_ws_bytes;
    int fp8;         /* the KV cache is FP8 E4M3 (m->kv_dtype): attn_fp8 */
    float *kv_scale; /* FP8: [L, 2, nkv] the static per-head K and V scales (frt_model_kv_scales_upload) */
    void *attn_ws, *prefill_attn_ws, *sample_ws;
    size_t attn_ws_bytes, prefill_attn_ws_bytes, sample_ws_bytes;
    int32_t *gpos;   /* m->G > 1: [G + 2] a group replay's piece starts, C and attn_pieces * C (frt_group_pos) */
    int attn_pieces; /* m->G > 1: pieces a group replay's attention launch takes (attn_prefill) */
    int32_t *debug_rows;
    float *debug;
    size_t debug_off, debug_rows_off;
    /* The restore sources of the append buckets' attention
     * (frt_cuda_attention_prefill_src; cd_kv_source): [L] descriptors of
     * FRT_CUDA_KV_SRC_BYTES (device, zero: none), their host staging
     * (pinned), and whether a source is set. */
    char *kv_src;
    frt_buffer *kv_src_hbuf;
    int kv_src_set;
    const void **kv_src_key; /* [2 L] the k, v rows the staging's maps describe (kv_src_rows of them): a capsule
                                restored again reuses them */
    int kv_src_rows;
} cd_model;

/* Whether a prefill piece's products take E4M3 activations (c->xq / c->xs):
 * FP8 weights with per-channel scales (a block-wise checkpoint's prefill
 * runs bf16 GEMMs over its dequantized weights). The add_rmsnorm that
 * writes h then quantizes it too (prefill_norm). */
static int fp8_acts(const cd_model *c) { return c->wfp8 && !c->wblk; }

static size_t align_up(size_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }
static int max_i(int a, int b) { return a > b ? a : b; }

/* ---- load --------------------------------------------------------------- */

static int set_sizes(frt_model *m, cd_model *c)
{
    const frt_model_config *cfg = &m->cfg;
    c->H = cfg->hidden_size;
    c->I = cfg->intermediate_size;
    c->V = cfg->vocab_size;
    c->L = cfg->n_layers;
    c->nh = cfg->n_heads;
    c->nkv = cfg->n_kv_heads;
    c->hd = cfg->head_dim;
    c->qd = c->nh * c->hd;
    c->kvd = c->nkv * c->hd;
    c->eps = cfg->rms_norm_eps;
    c->scale = 1.0f / sqrtf((float)c->hd);
    struct { const char *what; int v; } dims[] = {{"hidden_size", c->H},
                                                 {"intermediate_size", c->I},
                                                 {"vocab_size", c->V},
                                                 {"n_heads * head_dim", c->qd},
                                                 {"n_kv_heads * head_dim", c->kvd}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].v < 8 || dims[i].v % 8)
            return frt_error(FRT_ERR_UNSUPPORTED,
                             "dense cuda: %s = %d is not a positive multiple of 8 (cuBLASLt rows must be 16-byte "
                             "aligned)",
                             dims[i].what, dims[i].v);
    if (c->wfp8 && (c->H % 16 || c->I % 16 || c->qd % 16 || c->kvd % 16)) /* the Linear layers' dims */
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "dense cuda: FP8 weights need hidden_size, intermediate_size, n_heads * head_dim and "
                         "n_kv_heads * head_dim multiples of 16 (the E4M3 GEMV's and cuBLASLt FP8's 16-byte rows)");
    if (c->hd % 32 || c->hd < 32 || c->hd > 256)
        return frt_error(FRT_ERR_UNSUPPORTED, "dense cuda: head_dim %d (the CUDA attention takes multiples of 32 up "
                                              "to 256)", c->hd);
    return 0;
}

typedef struct wload {
    frt_model *m;
    cd_model *c;
    int pass;    /* 0: check and size, 1: upload */
    size_t used; /* bytes reserved */
    char *base;
} wload;

/* Tensor prefix+name (lm_head also at the top level) of shape [d0] (d1 ==
 * 0) or [d0, d1] into *out, its full name into full [256]. Errors:
 * FRT_ERR_NOT_FOUND, FRT_ERR_FORMAT (another shape). */
static int find_tensor(const frt_model *m, const char *name, int64_t d0, int64_t d1, char *full,
                       const frt_tensor **out)
{
    snprintf(full, 256, "%s%s", m->cfg.weight_prefix, name);
    const frt_tensor *t = frt_checkpoint_find(m->ckpt, full);
    if (!t && !strncmp(name, "lm_head", 7)) t = frt_checkpoint_find(m->ckpt, name);
    if (!t) return frt_error(FRT_ERR_NOT_FOUND, "checkpoint: missing tensor '%s'", full);
    int ndim = d1 ? 2 : 1;
    if (t->ndim != ndim || t->shape[0] != d0 || (ndim == 2 && t->shape[1] != d1))
        return frt_error(FRT_ERR_FORMAT, "checkpoint: tensor '%s' has %d dims [%lld, ...], expected [%lld%s%lld]",
                         full, t->ndim, (long long)t->shape[0], (long long)d0, ndim == 2 ? ", " : "",
                         ndim == 2 ? (long long)d1 : 0LL);
    *out = t;
    return 0;
}

/* Finds prefix+name (find_tensor), reserves it, and in pass 1 uploads it
 * as bf16 (to_bf16) or f32; *dst gets its device address. */
static int put(wload *wl, const char *name, int64_t d0, int64_t d1, int to_bf16, const void **dst)
{
    frt_model *m = wl->m;
    char full[256];
    const frt_tensor *t = NULL;
    FRT_TRY(find_tensor(m, name, d0, d1, full, &t));
    if (!frt_dtype_is_float(t->dtype))
        return frt_error(FRT_ERR_FORMAT, "checkpoint: tensor '%s' is %s, not a float dtype", full,
                         frt_dtype_name(t->dtype));
    FRT_TRY(frt_fp8w_check_dtype(t, full));
    size_t n = (size_t)(d0 * (d1 ? d1 : 1));
    size_t off = wl->used;
    wl->used += align_up(n * (to_bf16 ? 2 : 4));
    if (wl->pass == 0) return 0;
    frt_dtype want = to_bf16 ? FRT_DT_BF16 : FRT_DT_F32;
    if (t->dtype == want) {
        FRT_TRY(frt_buffer_write(wl->c->wbuf, off, t->data, t->nbytes, m->stream));
    } else {
        float *f = malloc(n * sizeof(float) + 1);
        uint16_t *h = to_bf16 ? malloc(n * sizeof(uint16_t) + 1) : NULL;
        int rc = !f || (to_bf16 && !h) ? frt_error(FRT_ERR_OUT_OF_MEMORY, "dense cuda: out of memory converting '%s'", full)
                                      : frt_tensor_to_f32(t, f);
        if (rc == 0 && to_bf16) frt_f32_array_to_bf16(f, h, n);
        if (rc == 0) rc = frt_buffer_write(wl->c->wbuf, off, to_bf16 ? (void *)h : (void *)f, n * (to_bf16 ? 2 : 4),
                                           m->stream);
        if (rc == 0) rc = frt_stream_sync(m->stream); /* the host copy must outlive the transfer */
        free(f);
        free(h);
        FRT_TRY(rc);
    }
    *dst = wl->base + off;
    return 0;
}

/* A Linear weight with FP8 weights (c->wfp8): its E4M3 codes [d0, d1] and
 * per-channel scales [d0] (frt_fp8w_linear_codes) reserved in the arena and, in
 * pass 1, uploaded; *dst gets their device addresses. */
static int put_fp8(wload *wl, const char *name, int64_t d0, int64_t d1, cd_fp8 *dst)
{
    frt_model *m = wl->m;
    char full[256];
    snprintf(full, sizeof full, "%s%s", m->cfg.weight_prefix, name);
    size_t woff = wl->used, soff = woff + align_up((size_t)(d0 * d1));
    wl->used = soff + align_up(frt_fp8w_n_scales(m, d0, d1) * sizeof(float));
    FRT_TRY(frt_fp8w_arena_put(m, wl->c->wbuf, wl->pass, full, d0, d1, woff, soff));
    if (wl->pass == 0) return 0;
    dst->w = (const uint8_t *)(wl->base + woff);
    dst->s = (const float *)(const void *)(wl->base + soff);
    return 0;
}

#define PUT_M(field, name, d0, d1)                                                                  \
    do {                                                                                            \
        const void *p_ = NULL;                                                                      \
        FRT_TRY(put(wl, (name), (d0), (d1), 1, &p_));                                               \
        (field) = (const uint16_t *)p_;                                                             \
    } while (0)
#define PUT_V(field, name, d0)                                                                      \
    do {                                                                                            \
        const void *p_ = NULL;                                                                      \
        FRT_TRY(put(wl, (name), (d0), 0, 0, &p_));                                                  \
        (field) = (const float *)p_;                                                                \
    } while (0)

/* The LM head with params.lm_head_dtype FRT_WEIGHT_FP8 (docs/fp8.md "An
 * FP8 LM head"): tensor `name` (lm_head.weight, also at the top level, or a
 * tied model's embedding) as E4M3 codes [V, H] and per-row scales [V] into
 * c->head. */
static int put_lm_head8(wload *wl, const char *name, int64_t V, int64_t H)
{
    frt_model *m = wl->m;
    char full[256];
    const frt_tensor *t = NULL;
    FRT_TRY(find_tensor(m, name, V, H, full, &t));
    FRT_TRY(frt_lm_head_cuda_fp8_ok(H));
    size_t woff = wl->used, soff = woff + align_up((size_t)(V * H));
    wl->used = soff + align_up((size_t)V * sizeof(float));
    FRT_TRY(frt_fp8w_lm_head_put(m, wl->c->wbuf, wl->pass, t, full, V, H, woff, soff));
    if (wl->pass == 0) return 0;
    wl->c->head.q = (const uint8_t *)(wl->base + woff);
    wl->c->head.s = (const float *)(const void *)(wl->base + soff);
    return 0;
}

/* Linear weight `name`: bf16 into *bf, or (c->wfp8) E4M3 codes and
 * per-channel scales into *f8. */
static int put_linear(wload *wl, const char *name, int64_t d0, int64_t d1, const uint16_t **bf, cd_fp8 *f8)
{
    if (wl->c->wfp8) return put_fp8(wl, name, d0, d1, f8);
    const void *p = NULL;
    FRT_TRY(put(wl, name, d0, d1, 1, &p));
    *bf = (const uint16_t *)p;
    return 0;
}

static int load_all(wload *wl)
{
    frt_model *m = wl->m;
    cd_model *c = wl->c;
    const frt_model_config *cfg = &m->cfg;
    int64_t H = c->H, I = c->I, V = c->V;
    wl->used = 0;
    /* the RoPE table of dense.c, first in the arena */
    size_t rope_off = wl->used;
    wl->used += align_up((size_t)(c->hd / 2) * sizeof(float));
    if (wl->pass == 1) {
        FRT_TRY(frt_buffer_write(c->wbuf, rope_off, dense_of(m)->inv_freq, (size_t)(c->hd / 2) * sizeof(float),
                                 m->stream));
        c->inv_freq = (const float *)(const void *)(wl->base + rope_off);
    }
    PUT_M(c->embed, "embed_tokens.weight", V, H);
    PUT_V(c->final_norm, "norm.weight", H);
    if (m->params.lm_head_dtype == FRT_WEIGHT_FP8)
        FRT_TRY(put_lm_head8(wl, cfg->tie_word_embeddings ? "embed_tokens.weight" : "lm_head.weight", V, H));
    else if (cfg->tie_word_embeddings)
        c->head.w = c->embed;
    else
        PUT_M(c->head.w, "lm_head.weight", V, H);
    for (int l = 0; l < c->L; l++) {
        cd_layer *lw = &c->layers[l];
        cd_layer8 dummy, *l8 = c->wfp8 ? &c->layers8[l] : &dummy; /* dummy: never written without wfp8 */
        char n[160];
#define NAME(suffix) (snprintf(n, sizeof n, "layers.%d.%s", l, suffix), n)
        PUT_V(lw->input_ln, NAME("input_layernorm.weight"), H);
        PUT_V(lw->post_ln, NAME("post_attention_layernorm.weight"), H);
        FRT_TRY(put_linear(wl, NAME("self_attn.q_proj.weight"), c->qd, H, &lw->q_proj, &l8->q_proj));
        FRT_TRY(put_linear(wl, NAME("self_attn.k_proj.weight"), c->kvd, H, &lw->k_proj, &l8->k_proj));
        FRT_TRY(put_linear(wl, NAME("self_attn.v_proj.weight"), c->kvd, H, &lw->v_proj, &l8->v_proj));
        FRT_TRY(put_linear(wl, NAME("self_attn.o_proj.weight"), H, c->qd, &lw->o_proj, &l8->o_proj));
        if (cfg->attention_bias) {
            PUT_V(lw->q_bias, NAME("self_attn.q_proj.bias"), c->qd);
            PUT_V(lw->k_bias, NAME("self_attn.k_proj.bias"), c->kvd);
            PUT_V(lw->v_bias, NAME("self_attn.v_proj.bias"), c->kvd);
        }
        if (cfg->o_proj_bias) PUT_V(lw->o_bias, NAME("self_attn.o_proj.bias"), H);
        if (cfg->qk_norm) {
            PUT_V(lw->q_norm, NAME("self_attn.q_norm.weight"), c->hd);
            PUT_V(lw->k_norm, NAME("self_attn.k_norm.weight"), c->hd);
        }
        FRT_TRY(put_linear(wl, NAME("mlp.gate_proj.weight"), I, H, &lw->gate_proj, &l8->gate_proj));
        FRT_TRY(put_linear(wl, NAME("mlp.up_proj.weight"), I, H, &lw->up_proj, &l8->up_proj));
        FRT_TRY(put_linear(wl, NAME("mlp.down_proj.weight"), H, I, &lw->down_proj, &l8->down_proj));
#undef NAME
    }
    return 0;
}

/* Whether the norm preps (qwen3's q / k norms with RoPE and the append)
 * take this model's head_dim. */
static int norm_prep_ok(const cd_model *c) { return c->hd == 64 || c->hd == 128 || c->hd == 256; }

/* Whether every layer's q_proj, k_proj and v_proj lie end to end in the
 * arena (bf16; put() keeps the order, 256-byte aligned sizes leave no gap),
 * their biases too where they have them (one bias add over the fused row),
 * q / k norms only with a head_dim the norm prep takes
 * (frt_dense_prefill_prep_packed_norm), and the fused output [R, qd + 2
 * kvd] fits the t0 scratch [R, max(qd, I, H)]: then a prefill piece runs
 * them as one GEMM (qkv_one). */
static int qkv_fused(const cd_model *c)
{
    const size_t H = (size_t)c->H;
    if (c->wfp8 || c->qd + 2 * c->kvd > max_i(max_i(c->qd, c->I), c->H)) return 0;
    for (int l = 0; l < c->L; l++) {
        const cd_layer *lw = &c->layers[l];
        if ((lw->q_bias && (lw->k_bias != lw->q_bias + c->qd || lw->v_bias != lw->k_bias + c->kvd)) ||
            (lw->q_norm && !norm_prep_ok(c)) || lw->k_proj != lw->q_proj + (size_t)c->qd * H ||
            lw->v_proj != lw->k_proj + (size_t)c->kvd * H)
            return 0;
    }
    return 1;
}

static int cd_load_weights(frt_model *m)
{
    cd_model *c = calloc(1, sizeof *c);
    if (!c) return frt_error(FRT_ERR_OUT_OF_MEMORY, "dense cuda: out of memory");
    m->bk_data = c;
    c->wfp8 = m->params.weight_dtype == FRT_WEIGHT_FP8 || m->cfg.quant.method != FRT_QUANT_NONE;
    c->wblk = frt_fp8w_blocked(m);
    c->resid_gemm = !c->wfp8 && !m->cfg.o_proj_bias;
    FRT_TRY(set_sizes(m, c));
    c->layers = calloc((size_t)c->L, sizeof *c->layers);
    c->layers8 = c->wfp8 ? calloc((size_t)c->L, sizeof *c->layers8) : NULL;
    if (!c->layers || (c->wfp8 && !c->layers8))
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "dense cuda: out of memory for the layer table");
    wload wl = {.m = m, .c = c, .pass = 0};
    FRT_TRY(load_all(&wl)); /* every name and shape checked before the device allocation */
    size_t bytes = wl.used;
    FRT_TRY(frt_buffer_alloc(m->ctx, "cuda.weights", FRT_SPACE_DEVICE, bytes, &c->wbuf));
    FRT_TRY(frt_buffer_fill(c->wbuf, 0, bytes, 0, m->stream));
    wl.base = frt_buffer_ptr(c->wbuf);
    wl.pass = 1;
    FRT_TRY(load_all(&wl));
    FRT_TRY(frt_stream_sync(m->stream));
    if (wl.used != bytes) return frt_error(FRT_ERR_STATE, "dense cuda: weight layout changed between passes");
    m->weight_bytes = bytes;
    c->qkv_one = qkv_fused(c);
    if (c->wfp8) { /* the cpu rule's description plus this backend's prefill GEMM (who applies its scales,
                      cuBLASLt or the epilogue, is in the FP8 plans the fingerprint hashes) */
        snprintf(c->wdesc, sizeof c->wdesc, "%s,%s", frt_fp8w_desc(m),
                 c->wblk ? "scales=blk128x128-f32,decode=gemv-e4m3-b128,prefill_gemm=bf16-dequantized-weights"
                         : "prefill_gemm=cublaslt-e4m3-tn-f32acc");
        m->weights_desc = c->wdesc;
    }
    return 0;
}

/* ---- scratch and GEMM plans --------------------------------------------- */

/* FP8 weights: the FP8 GEMM of every prefill bucket (docs/fp8.md). */
static int plan_fp8(const frt_model *m, cd_model *c)
{
    FRT_TRY(frt_cuda_gemm_fp8_create(c->gemm, &c->gemm8));
    /* gate and up (bf16 accumulators) and down (f32) with unit scales,
     * applied by their consumers (c->mlp_acc): cuBLASLt's outer-vector
     * kernels run these shapes ~20 % slower than its unit-scale ones (H100,
     * 2048 rows: 4096 -> 28672 415 against 329 us; docs/PERF.md). Only
     * where their keys are theirs alone (a plan is one scaling): gate /
     * up's bf16 plans are keyed apart from the f32 ones, down's (I, H)
     * is o_proj's when I == qd. */
    c->mlp_acc = c->I != c->qd;
    const int shapes[4][2] = {{c->H, c->qd}, {c->H, c->kvd}, {c->qd, c->H}, {c->H, c->I}};
    for (int i = 0; i < m->n_buckets; i++) {
        /* the append buckets (below C) take their own algorithms: only their
         * own pieces run them, the same in a cold prefill and after a
         * restore (docs/fp8.md "The append's FP8 GEMMs"); C and the groups
         * keep the shape's */
        FRT_TRY(frt_cuda_gemm_fp8_set_own_algo(c->gemm8, m->buckets[i] < m->C));
        for (int k = 0; k < 4; k++) {
            const int acc = k == 3 && c->mlp_acc; /* gate, up: the accumulators in bf16 */
            FRT_TRY(frt_cuda_gemm_fp8_set_scaling(c->gemm8, acc ? FRT_CUDA_GEMM_FP8_SCALES_NONE
                                                                : FRT_CUDA_GEMM_FP8_SCALES_AUTO));
            FRT_TRY(frt_cuda_gemm_fp8_plan(c->gemm8, m->buckets[i], shapes[k][0], shapes[k][1], acc ? BF16 : F32));
        }
        FRT_TRY(frt_cuda_gemm_fp8_set_scaling(c->gemm8, c->mlp_acc ? FRT_CUDA_GEMM_FP8_SCALES_EPILOGUE
                                                                   : FRT_CUDA_GEMM_FP8_SCALES_AUTO));
        FRT_TRY(frt_cuda_gemm_fp8_plan(c->gemm8, m->buckets[i], c->I, c->H, F32)); /* down */
    }
    FRT_TRY(frt_cuda_gemm_fp8_set_own_algo(c->gemm8, 0));
    return frt_cuda_gemm_fp8_set_scaling(c->gemm8, FRT_CUDA_GEMM_FP8_SCALES_AUTO);
}

/* Whether a prefill replay of `rows` rows (a bucket, or C for a group of
 * whole pieces: a group takes its pieces' decision) runs q | k | v as one
 * GEMM; the GEMV buckets (rows <= FRT_CUDA_GEMV_MAX_N) keep their
 * per-matrix plans (the hybrid's rule, qwen35_cuda.h one_gemm). */
static int qkv_one_gemm(const cd_model *c, int rows) { return c->qkv_one && rows > FRT_CUDA_GEMV_MAX_N; }

static int plan_all(cd_model *c, int n, int skinny)
{
    FRT_TRY(frt_cuda_gemm_set_skinny(c->gemm, skinny == 2));
    if (qkv_one_gemm(c, n)) FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->qd + 2 * c->kvd, F32, 0)); /* q | k | v */
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->qd, F32, 0));  /* q_proj */
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->kvd, F32, 0)); /* k_proj, v_proj */
    const int acc = n > 1 && c->resid_gemm; /* n 1: decode's GEMV plans, made below */
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->qd, c->H, F32, acc)); /* o_proj */
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->I, c->H, F32, acc)); /* down */
    FRT_TRY(frt_cuda_gemm_set_skinny(c->gemm, skinny >= 1));
    FRT_TRY(frt_cuda_gemm_plan(c->gemm, n, c->H, c->I, BF16, 0)); /* gate, up (bf16: the SwiGLU's input) */
    return frt_cuda_gemm_set_skinny(c->gemm, 0);
}

/* Every GEMM plan of the load, in one order whatever params.prefill_group
 * (the plan order is hashed into the fingerprint; the group plans of
 * cd_prefill_group are left out of it): decode (1 row), the prefill buckets,
 * FP8's, and the batched decode's (groups of up to FRT_CUDA_GEMV_MAX_N
 * rows, made whatever the slot count, so the fingerprint does not depend on
 * it). Creates the handle on first use; later calls find every plan made. */
static int make_plans(frt_model *m, cd_model *c)
{
    if (!c->gemm) {
        FRT_TRY(frt_cuda_gemm_create(GEMM_WORKSPACE, &c->gemm));
        FRT_TRY(frt_cuda_gemm_add_stream(c->gemm, frt_stream_native(m->stream)));
    }
    FRT_TRY(plan_all(c, 1, 0));
    for (int i = 0; i < m->n_buckets; i++) {
        if (m->buckets[i] == m->C && !c->tuned) { /* before the piece's plans, which groups are made like */
            c->tuned = 1;
            FRT_TRY(frt_gemm_tune_appends(m, c->gemm));
        }
        FRT_TRY(plan_all(c, m->buckets[i], m->buckets[i] < m->C ? frt_gemm_skinny_mode(m) : 0));
    }
    if (c->wfp8 && !c->wblk && !c->gemm8) FRT_TRY(plan_fp8(m, c)); /* wblk: the bf16 plans above */
    for (int g = 1; g <= FRT_CUDA_GEMV_MAX_N; g++) {
        FRT_TRY(frt_cuda_gemm_plan(c->gemm, g, c->qd, c->H, F32, 1)); /* o_proj into the residual */
        FRT_TRY(frt_cuda_gemm_plan(c->gemm, g, c->I, c->H, F32, 1));  /* down_proj into the residual */
        if (c->head.w) FRT_TRY(frt_cuda_gemm_plan(c->gemm, g, c->H, c->V, F32, 0)); /* lm_head (bf16) */
    }
    return 0;
}

/* The dtype a prefill's gate and up products are written in, the SwiGLU's
 * input: bf16 (half the bytes the SwiGLU reads; with FP8 weights and
 * mlp_acc the unscaled accumulators rounded once), f32 from the FP8 GEMM
 * with its scales (its plans are f32). */
static frt_cuda_dtype gate_dt(const cd_model *c) { return c->wfp8 && !c->wblk && !c->mlp_acc ? F32 : BF16; }

/* frt_arch_backend.prefill_group (docs/architectures.md "Prefill groups"):
 * the group plans of the five prefill products (plan_all's), checked on the
 * device over layer 0's weights (frt_group_check). Block-wise FP8 weights
 * and debug_hidden run one piece a replay. */
static int cd_prefill_group(frt_model *m, int want, int *got)
{
    cd_model *c = m->bk_data;
    const char *why = m->params.debug_hidden ? "debug_hidden records one piece a replay"
                      : c->wblk ? "block-wise FP8 weights run every prefill piece on its own (their dequantized "
                                  "GEMMs are not checked for row groups)"
                                : NULL;
    if (why) return frt_group_refuse("dense cuda", why, want, got);
    FRT_TRY(make_plans(m, c));
    const cd_layer *l0 = &c->layers[0];
    /* o_proj and down_proj accumulate into the residual as gemm_out runs them */
    frt_group_product p[5] = {{c->H, c->qd, F32, l0->q_proj, NULL, NULL, 0},
                              {c->H, c->kvd, F32, l0->k_proj, NULL, NULL, 0},
                              {c->qd, c->H, F32, l0->o_proj, NULL, NULL, c->resid_gemm},
                              {c->H, c->I, gate_dt(c), l0->gate_proj, NULL, NULL, 0},
                              {c->I, c->H, F32, l0->down_proj, NULL, NULL, c->resid_gemm}};
    if (c->wfp8) {
        const cd_layer8 *l8 = &c->layers8[0];
        const cd_fp8 *w8[5] = {&l8->q_proj, &l8->k_proj, &l8->o_proj, &l8->gate_proj, &l8->down_proj};
        for (int k = 0; k < 5; k++) {
            p[k].w = NULL;
            p[k].q = w8[k]->w;
            p[k].s = w8[k]->s;
        }
    }
    if (qkv_one_gemm(c, m->C)) { /* the pieces run q | k | v as one product (the weights lie end to end) */
        p[0].out = c->qd + 2 * c->kvd;
        p[1] = p[4];
        return frt_group_check(m, "dense cuda", c->gemm, NULL, p, 4, want, got);
    }
    return frt_group_check(m, "dense cuda", c->gemm, c->wfp8 ? c->gemm8 : NULL, p, 5, want, got);
}

/* The FP8 KV cache's static per-head scales (a calibration file's, else
 * 1.0; KV entries 2 l and 2 l + 1 are layer l's K and V) into
 * c->kv_scale [L, 2, nkv]. */
static int fill_kv_scale(frt_model *m, cd_model *c)
{
    c->fp8 = m->kv_dtype == FRT_DT_F8_E4M3;
    return frt_model_kv_scales_upload(m, 2 * c->L, c->nkv, c->sbuf,
                                      (size_t)((char *)c->kv_scale - (char *)frt_buffer_ptr(c->sbuf)));
}

static int cd_alloc_scratch(frt_model *m)
{
    cd_model *c = m->bk_data;
    if (!c) return frt_error(FRT_ERR_STATE, "dense cuda: scratch before weights");
    /* rows of the prefill scratch: a group of G pieces (m->G 1: one piece) */
    size_t R = (size_t)m->C * (size_t)(m->G > 1 ? m->G : 1), f = sizeof(float), h2 = sizeof(uint16_t), H = (size_t)c->H;
    int slots = m->params.branch_slots > 1 ? m->params.branch_slots : 1;
    if (slots > BATCH_MAX) slots = BATCH_MAX;
    if (slots > m->C) slots = m->C; /* the batch's rows live in the prefill scratch */
    size_t wide = (size_t)max_i(max_i(c->qd, c->I), c->H);
    c->attn_ws_bytes = frt_cuda_attention_workspace_bytes(1, m->max_seq, c->nh, c->hd, DECODE_SPLIT);
    c->attn_ws_bytes *= (size_t)slots; /* the batched decode: one workspace a branch */
    c->prefill_attn_ws_bytes = frt_cuda_attention_prefill_workspace_bytes(m->C, m->max_seq, c->nh, c->hd);
    /* a group replay's attention: c->attn_pieces pieces a launch */
    c->attn_pieces = frt_group_attn_pieces(m->G, m->C, m->max_seq, c->nh, c->hd, &c->prefill_attn_ws_bytes);
    FRT_TRY(frt_cuda_sample_workspace_bytes(c->V, &c->sample_ws_bytes));
    if (slots > 1) FRT_TRY(frt_batch_ends_bytes(slots, c->V, &c->ends_ws_bytes));
    for (int pass = 0; pass < 2; pass++) {
        char *base = pass ? frt_buffer_ptr(c->sbuf) : NULL;
        size_t off = 0;
#define CARVE(field, type, bytes)                                                                   \
    do {                                                                                            \
        if (base) (field) = (type *)(void *)(base + off);                                           \
        off += align_up(bytes) + ALIGN;                                                             \
    } while (0)
        CARVE(c->x, float, R * H * f);
        CARVE(c->h, uint16_t, R * H * h2);
        CARVE(c->hf, float, R * H * f);
        CARVE(c->last, uint16_t, H * h2);
        CARVE(c->q, float, R * (size_t)c->qd * f);
        CARVE(c->k, float, R * (size_t)c->kvd * f);
        CARVE(c->v, float, R * (size_t)c->kvd * f);
        CARVE(c->t0, float, R * wide * f);
        CARVE(c->t1, float, R * wide * f);
        CARVE(c->delta, float, R * H * f);
        CARVE(c->ob, uint16_t, R * wide * h2);
        CARVE(c->attn_ws, char, c->attn_ws_bytes);
        CARVE(c->prefill_attn_ws, char, c->prefill_attn_ws_bytes);
        CARVE(c->sample_ws, char, c->sample_ws_bytes);
        CARVE(c->kv_scale, float, (size_t)2 * c->L * c->nkv * f);
        if (frt_cuda_attention_prefill_head_ok(c->hd)) CARVE(c->q16, uint16_t, R * (size_t)c->qd * h2);
        if (m->G > 1) CARVE(c->gpos, int32_t, (size_t)(m->G + 2) * sizeof(int32_t));
        if (fp8_acts(c)) {
            CARVE(c->xq, uint8_t, R * wide);
            CARVE(c->xs, float, R * f);
        }
        if (c->wblk) CARVE(c->wdq, uint16_t, (size_t)max_i(max_i(c->qd, c->kvd), c->I) * (size_t)c->H * h2);
        if (slots > 1) {
            size_t tab = (size_t)slots * sizeof(void *);
            CARVE(c->blogits, float, (size_t)slots * (size_t)c->V * f);
            CARVE(c->tab_k, uint16_t *, (size_t)c->L * tab);
            CARVE(c->tab_v, uint16_t *, (size_t)c->L * tab);
            CARVE(c->tab_pos, int32_t *, tab);
            CARVE(c->tab_shared, int32_t, (size_t)slots * sizeof(int32_t));
            CARVE(c->ends_ws, char, c->ends_ws_bytes);
        }
        CARVE(c->kv_src, char, (size_t)c->L * FRT_CUDA_KV_SRC_BYTES);
        c->debug_rows_off = off;
        CARVE(c->debug_rows, int32_t, sizeof(int32_t));
        if (m->params.debug_hidden) {
            c->debug_off = off;
            CARVE(c->debug, float, (size_t)(c->L + 2) * R * H * f);
        }
#undef CARVE
        if (!pass) {
            FRT_TRY(frt_buffer_alloc(m->ctx, "cuda.scratch", FRT_SPACE_DEVICE, off, &c->sbuf));
            FRT_TRY(frt_buffer_fill(c->sbuf, 0, off, 0, m->stream));
        }
    }
    FRT_TRY(frt_buffer_alloc(m->ctx, "cuda.kv_src", FRT_SPACE_PINNED_HOST, (size_t)c->L * FRT_CUDA_KV_SRC_BYTES,
                             &c->kv_src_hbuf));
    c->kv_src_key = calloc((size_t)2 * c->L, sizeof *c->kv_src_key);
    if (!c->kv_src_key) return frt_error(FRT_ERR_OUT_OF_MEMORY, "dense cuda: out of memory");
    FRT_TRY(fill_kv_scale(m, c));
    FRT_TRY(make_plans(m, c)); /* the groups' plans: cd_prefill_group */
    c->batch_g = frt_cuda_gemm_gemv_rows(c->gemm);
    if (c->wfp8) { /* and the E4M3 GEMV's rows: x [g, in] in one block's shared memory */
        int g8 = frt_cuda_gemv_fp8_max_n(max_i(max_i(c->H, c->qd), c->I));
        if (g8 < c->batch_g) c->batch_g = g8;
    }
    c->batch_slots = c->batch_g >= 2 && slots > 1 ? slots : 0;
    if (c->batch_slots) FRT_TRY(frt_batch_ends_init(&c->ends, c->batch_slots, c->V, c->ends_ws, c->blogits));
    return frt_stream_sync(m->stream);
}

static void cd_free(frt_model *m)
{
    cd_model *c = m->bk_data;
    if (!c) return;
    frt_batch_ends_free(&c->ends);
    frt_cuda_gemm_fp8_destroy(c->gemm8); /* before the base handle it uses */
    if (m->weights_desc == c->wdesc) m->weights_desc = NULL; /* c's storage */
    frt_cuda_gemm_destroy(c->gemm);
    frt_buffer_free(c->sbuf);
    frt_buffer_free(c->kv_src_hbuf);
    free(c->kv_src_key);
    frt_buffer_free(c->wbuf);
    free(c->layers);
    free(c->layers8);
    free(c);
    m->bk_data = NULL;
}

/* The GEMM plans chosen at load, hashed into the fingerprint (another plan
 * is other arithmetic: a capsule made under it must not restore here). */
static uint64_t cd_fingerprint_extra(const frt_model *m)
{
    const cd_model *c = m->bk_data;
    if (!c) return 0;
    const uint64_t f8 = frt_cuda_gemm_fp8_fingerprint(c->gemm8); /* 0 without FP8 weights */
    return frt_cuda_gemm_fingerprint(c->gemm) ^ (f8 * 0x9E3779B97F4A7C15ull);
}

/* ---- the forward pass --------------------------------------------------- */

typedef struct fwd {
    frt_model *m;
    cd_model *c;
    frt_stream *s; /* the recording stream (st is its native handle) */
    void *st;
    int R, decode;
    int pieces; /* prefill: the whole pieces of C rows a group replay runs (R = pieces * C); 1 otherwise */
    int qkv_one; /* prefill: q | k | v as one GEMM into c->t0 (qkv_one at C for a group, else at R) */
    const int32_t *d_n, *d_no_logits; /* NULL for decode */
    int32_t *d_pos, *d_pending, *d_has_logits;
    uint64_t *d_rng;
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
    f.pieces = frt_group_pieces(m, R, decode);
    f.qkv_one = !decode && qkv_one_gemm(f.c, f.pieces > 1 ? m->C : R);
    char *bd = frt_buffer_ptr(m->boundary), *sp = frt_buffer_ptr(m->step);
    f.d_n = decode ? NULL : (const int32_t *)(const void *)(sp + offsetof(frt_step_args, n_valid));
    f.d_no_logits = decode ? NULL : (const int32_t *)(const void *)(sp + offsetof(frt_step_args, no_logits));
    f.d_pos = (int32_t *)(void *)(bd + offsetof(frt_boundary, pos));
    f.d_pending = (int32_t *)(void *)(bd + offsetof(frt_boundary, pending));
    f.d_has_logits = (int32_t *)(void *)(bd + offsetof(frt_boundary, has_logits));
    f.d_rng = (uint64_t *)(void *)(bd + offsetof(frt_boundary, rng));
    f.d_params = (const frt_cuda_sampler_params *)(const void *)(sp + offsetof(frt_step_args, sampling));
    f.d_mask_on = (const int32_t *)(const void *)(sp + offsetof(frt_step_args, mask_on));
    return f;
}

static int gemm(const fwd *f, void *y, frt_cuda_dtype yt, const uint16_t *x, const uint16_t *w, int in, int out)
{
    return frt_cuda_gemm_run(f->c->gemm, f->st, y, yt, x, w, f->R, in, out, 0);
}

/* FP8 weights in a prefill piece (docs/fp8.md "FP8 activations"): x [R,
 * in] bf16 quantized per token into c->xq / c->xs, the input of the lin
 * calls that follow (a no-op otherwise). */
static int act_fp8(const fwd *f, const uint16_t *x, int in)
{
    cd_model *c = f->c;
    if (!fp8_acts(c) || f->decode) return 0;
    return frt_cuda_fp8_quantize_rows_dynamic(f->st, c->xq, c->xs, x, f->R, in);
}

/* A prefill piece: y [R, out] f32 = x [R, in] bf16 . W^T for a Linear
 * weight: bf16 w, or with FP8 weights (c->wfp8) w8: the FP8 GEMM on c->xq,
 * x quantized per token by act_fp8 before: (xq . wq^T) * s_x[t] * s_w[o]
 * (docs/fp8.md); with block scales (c->wblk) the bf16 GEMM of x over
 * bf16(decode(wq) * s_blk) dequantized into c->wdq first. Decode takes the
 * fused GEMVs (qkv_products, swiglu_products, resid_add). */
static int lin_as(const fwd *f, void *y, frt_cuda_dtype yt, const uint16_t *x, const uint16_t *w, const cd_fp8 *w8,
                  int in, int out)
{
    cd_model *c = f->c;
    if (!c->wfp8) return gemm(f, y, yt, x, w, in, out);
    if (c->wblk) {
        FRT_TRY(frt_cuda_fp8_dequantize_b128_bf16(f->st, c->wdq, w8->w, w8->s, out, in));
        return gemm(f, y, yt, x, c->wdq, in, out);
    }
    return frt_cuda_gemm_fp8_run(c->gemm8, f->st, y, yt, c->xq, c->xs, w8->w, w8->s, f->R, in, out);
}

/* FP8 prefill: act_fp8 of the normed input c->h, unless the add_rmsnorm
 * that wrote it quantized it too (by_norm: every norm before q | k | v and
 * gate | up but the first layer's, a plain rmsnorm). */
static int h_fp8(const fwd *f, int by_norm)
{
    if (by_norm) return 0; /* prefill_norm quantized it (or act_fp8 would do nothing) */
    return act_fp8(f, f->c->h, f->c->H);
}

static int lin(const fwd *f, float *y, const uint16_t *x, const uint16_t *w, const cd_fp8 *w8, int in, int out)
{
    return lin_as(f, y, F32, x, w, w8, in, out);
}

/* Rows y [g, H] f32 += x [g, in] bf16 . W^T: decode's GEMV accumulating
 * store (bf16 w through the plan's GEMV, or the E4M3 GEMV, scales in its
 * epilogue; both batch-invariant); a prefill piece with c->resid_gemm (bf16
 * weights) through the plan's cuBLASLt epilogue, beta 1. */
static int resid_add(const fwd *f, float *y, const uint16_t *x, const uint16_t *w, const cd_fp8 *w8, int g, int in)
{
    cd_model *c = f->c;
    if (c->wfp8) return (c->wblk ? frt_cuda_gemv_fp8_b128 : frt_cuda_gemv_fp8)(f->st, y, F32, 1, x, w8->w, w8->s, g, in,
                                                                           c->H);
    return frt_cuda_gemm_run(c->gemm, f->st, y, F32, x, w, g, in, c->H, 1);
}

/* A block's output projection x [R, in] bf16 . w [H, in]^T: decode adds it
 * straight into the residual stream c->x (the GEMV's accumulating store is
 * fl(sum + x), the bits of storing delta and adding it in f32); so does a
 * prefill with c->resid_gemm (cuBLASLt's epilogue x = fl(sum + x), beta 1);
 * else prefill writes c->delta, which the next add_rmsnorm adds. */
static int gemm_out(const fwd *f, const uint16_t *x, const uint16_t *w, const cd_fp8 *w8, int in)
{
    cd_model *c = f->c;
    if (f->decode || c->resid_gemm) return resid_add(f, c->x, x, w, w8, f->R, in);
    FRT_TRY(act_fp8(f, x, in));
    return lin(f, c->delta, x, w, w8, in, c->H);
}

/* FP8 weights' field of layer l (NULL without them). */
#define L8(c, l, field) ((c)->wfp8 ? &(c)->layers8[l].field : NULL)

/* Decode: the RMSNorm of the residual c->x with weight w (x * w), as the
 * prologue of the GEMV that consumes it. */
static frt_cuda_gemv_norm resid_norm(const fwd *f, const float *w)
{
    frt_cuda_gemv_norm nm = {f->c->x, w, f->c->eps, 0};
    return nm;
}

static int debug_copy(const fwd *f, int idx, const float *src)
{
    cd_model *c = f->c;
    if (!c->debug) return 0;
    size_t H = (size_t)c->H;
    float *dst = c->debug + (size_t)idx * (size_t)f->m->C * H;
    FRT_CUDA_TRY(cudaMemcpyAsync(dst, src, (size_t)f->R * H * sizeof(float), cudaMemcpyDeviceToDevice,
                                 (cudaStream_t)f->st));
    return 0;
}

/* Layer l's FP8 K (kv 0) or V (kv 1) scales [nkv] f32 (device). */
static const float *kv_scale_of(const cd_model *c, int l, int kv)
{
    return c->kv_scale + (size_t)(2 * l + kv) * (size_t)c->nkv;
}

/* Whether the attention of a prefill piece of R rows (a bucket below C:
 * one piece) reads restore sources (frt_cuda_attention_prefill_src): a
 * bf16 cache and sizes the kernel takes. The same rule at record time and
 * in cd_kv_source, so a source is set only for a graph that reads it. */
static int kv_source_on(const frt_model *m, int R)
{
    const cd_model *c = m->bk_data;
    return !c->fp8 && R < m->C && frt_cuda_attention_prefill_src_ok(R, c->nh, c->nkv, c->hd);
}

/* frt_arch_backend.kv_source: the sources of the next prefill (its first
 * piece of R rows) at position rows: layer l's K and V rows 0 .. rows - 1
 * from k[l], v[l]; k NULL: none from now on. */
static int cd_kv_source(frt_model *m, const void *const *k, const void *const *v, int rows, int R)
{
    cd_model *c = m->bk_data;
    cudaStream_t st = (cudaStream_t)frt_stream_native(m->stream);
    const size_t bytes = (size_t)c->L * FRT_CUDA_KV_SRC_BYTES;
    if (!k) { /* zeros: rows 0 */
        if (!c->kv_src_set) return 0;
        c->kv_src_set = 0;
        FRT_CUDA_TRY(cudaMemsetAsync(c->kv_src, 0, bytes, st));
        return 0;
    }
    if (!kv_source_on(m, R) || rows < 1 || rows % 128) return 0;
    /* The staging is rewritten only for other rows: the copy of a source
     * before has been read by then (the prefill after it synced its stream,
     * or the restore's copies after a failure did). */
    char *h = frt_buffer_ptr(c->kv_src_hbuf);
    int same = rows == c->kv_src_rows;
    for (int l = 0; l < c->L && same; l++) same = c->kv_src_key[2 * l] == k[l] && c->kv_src_key[2 * l + 1] == v[l];
    if (!same) {
        c->kv_src_rows = 0;
        for (int l = 0; l < c->L; l++) {
            FRT_TRY(frt_cuda_kv_src_encode(h + (size_t)l * FRT_CUDA_KV_SRC_BYTES, k[l], v[l], rows, c->nkv, c->hd));
            c->kv_src_key[2 * l] = k[l], c->kv_src_key[2 * l + 1] = v[l];
        }
        c->kv_src_rows = rows;
    }
    c->kv_src_set = 1; /* from here on the clear is owed, whatever happens */
    FRT_CUDA_TRY(cudaMemcpyAsync(c->kv_src, h, bytes, cudaMemcpyHostToDevice, st));
    return 1;
}

/* A prefill's attention of q [R, qd] f32 over layer l's cache (bf16, or
 * E4M3 codes with the scales ks / vs): the
 * FlashAttention kernel (a head_dim other than 64, 128 or 256: the
 * CUDA-core kernel), written as bf16 into o [R, qd] (the o_proj input;
 * both kernels round the f32 result once, RNE: the bits of an f32 output
 * converted). A group replay runs its pieces c->attn_pieces at a
 * time through frt_cuda_attention_prefill_pieces (the key splits of a
 * C-row launch; starts and row counts from c->gpos), the CUDA-core kernel
 * one piece a launch, so every row gets its piece's bits. */
static int attn_prefill(const fwd *f, int l, const void *q, frt_cuda_dtype q_dt, uint16_t *o, const void *kc,
                        const void *vc, const float *ks, const float *vs)
{
    frt_model *m = f->m;
    cd_model *c = f->c;
    const frt_group_attn g = {.stream = f->st, .out = o, .out_dtype = BF16, .q = q, .q_dtype = q_dt, .k_cache = kc,
                              .v_cache = vc, .k_scale = ks, .v_scale = vs, .d_start = f->d_pos, .d_n = f->d_n,
                              .rows = f->R,
                              .gpos = c->gpos, .pieces = f->pieces, .run = c->attn_pieces, .C = m->C,
                              .max_seq = m->max_seq, .n_heads = c->nh, .n_kv_heads = c->nkv, .head_dim = c->hd,
                              .scale = c->scale, .ws = c->prefill_attn_ws, .ws_bytes = c->prefill_attn_ws_bytes,
                              .kv_src = kv_source_on(m, f->R) ? c->kv_src + (size_t)l * FRT_CUDA_KV_SRC_BYTES : NULL};
    return frt_group_attention(&g);
}

/* Decode: layer lw's q, k, v biases for the prep to add (*tmp filled, its
 * address returned), or NULL where there are none or where the q / k norms
 * come between them and RoPE (then separate bias launches add them). */
static const frt_dense_qkv_bias *decode_bias(const cd_layer *lw, frt_dense_qkv_bias *tmp)
{
    if (!lw->q_bias || lw->q_norm) return NULL;
    tmp->q = lw->q_bias, tmp->k = lw->k_bias, tmp->v = lw->v_bias;
    return tmp;
}

/* After a prep: attention of the rows' roped q [R, qd] f32 (a prefill's q
 * NULL: c->q16 bf16, the prep wrote it there) over layer l's cache (bf16,
 * or E4M3 with its scales) into ob [R, qd] bf16: decode's
 * flash-decoding, or a prefill piece's FlashAttention (attn_prefill). */
static int attn_after_prep(const fwd *f, int l, const float *q, uint16_t *ob)
{
    frt_model *m = f->m;
    cd_model *c = f->c;
    const void *kc = frt_buffer_ptr(dense_of(m)->kv_k[l]), *vc = frt_buffer_ptr(dense_of(m)->kv_v[l]);
    const float *ks = c->fp8 ? kv_scale_of(c, l, 0) : NULL, *vs = c->fp8 ? kv_scale_of(c, l, 1) : NULL;
    if (!f->decode)
        return q ? attn_prefill(f, l, q, F32, ob, kc, vc, ks, vs)
                 : attn_prefill(f, l, c->q16, BF16, ob, kc, vc, ks, vs);
    if (c->fp8)
        return frt_cuda_attention_fp8(f->st, ob, BF16, q, F32, kc, vc, ks, vs, f->d_pos, f->d_n, f->R, m->max_seq,
                                      c->nh, c->nkv, c->hd, c->scale, DECODE_SPLIT, c->attn_ws, c->attn_ws_bytes);
    return frt_cuda_attention(f->st, ob, BF16, q, F32, kc, vc, f->d_pos, f->d_n, f->R, m->max_seq, c->nh, c->nkv,
                              c->hd, c->scale, DECODE_SPLIT, c->attn_ws, c->attn_ws_bytes);
}

/* The FP8 KV cache (docs/fp8.md): RoPE of q and k at the boundary's
 * positions, the roped k and v quantized into layer l's E4M3 cache (the
 * bound slot's) with the static per-head scales (decode: one launch,
 * frt_dense_decode_prep_fp8, the bits of the three of a prefill piece),
 * then attention over the E4M3 cache on tensor cores (the codes widened to
 * bf16 in shared memory, the scales folded into the softmax scale and the
 * output): the decode kernel's flash-decoding splits (fp32 accuracy) for
 * decode, the FlashAttention kernel for a prefill piece; a head_dim other
 * than 64, 128 or 256 takes the CUDA-core kernel (dequantized on load, f32)
 * in both. Output: bf16 into ob. */
static int attn_fp8(const fwd *f, int l, float *q, float *k, const float *v, uint16_t *ob)
{
    frt_model *m = f->m;
    cd_model *c = f->c;
    uint8_t *kc = frt_buffer_ptr(dense_of(m)->kv_k[l]), *vc = frt_buffer_ptr(dense_of(m)->kv_v[l]);
    const float *ks = kv_scale_of(c, l, 0), *vs = kv_scale_of(c, l, 1);
    if (f->decode) {
        frt_dense_qkv_bias b;
        FRT_TRY(frt_dense_decode_prep_fp8(f->st, q, k, v, c->inv_freq, kc, vc, ks, vs, f->d_pos, m->max_seq, c->nh,
                                          c->nkv, c->hd, decode_bias(&c->layers[l], &b)));
        return attn_after_prep(f, l, q, ob);
    }
    if (f->qkv_one) { /* the one GEMM's rows in place, q roped into c->q (or c->q16) */
        FRT_TRY(frt_dense_prefill_prep_packed_fp8(f->st, c->t0, c->qd + 2 * c->kvd, c->q16 ? NULL : c->q,
                                                  c->inv_freq, kc, vc, ks, vs, f->d_pos, f->d_n, f->R, m->max_seq,
                                                  c->nh, c->nkv, c->hd, c->q16));
        return attn_after_prep(f, l, c->q16 ? NULL : c->q, ob);
    }
    FRT_TRY(frt_dense_prefill_prep_fp8(f->st, q, k, v, c->inv_freq, kc, vc, ks, vs, f->d_pos, f->d_n, f->R,
                                       m->max_seq, c->nh, c->nkv, c->hd, c->q16)); /* RoPE and the append, one launch */
    return attn_after_prep(f, l, c->q16 ? NULL : q, ob);
}

/* qwen3's q / k norms in the prep (frt_dense_decode_prep_norm{,_fp8} of q,
 * k, v; frt_dense_prefill_prep_packed_norm{,_fp8} of the one GEMM's rows,
 * q into c->q), then attention into ob, over layer l's bf16 or FP8 cache. */
static int attn_norm_prep(const fwd *f, int l, float *q, float *k, const float *v, uint16_t *ob)
{
    frt_model *m = f->m;
    cd_model *c = f->c;
    const cd_layer *lw = &c->layers[l];
    void *st = f->st, *kc = frt_buffer_ptr(dense_of(m)->kv_k[l]), *vc = frt_buffer_ptr(dense_of(m)->kv_v[l]);
    const float *ks = c->fp8 ? kv_scale_of(c, l, 0) : NULL, *vs = c->fp8 ? kv_scale_of(c, l, 1) : NULL;
    const int W = c->qd + 2 * c->kvd, R = f->R;
    if (f->decode && c->fp8)
        FRT_TRY(frt_dense_decode_prep_norm_fp8(st, q, k, v, lw->q_norm, lw->k_norm, c->eps, c->inv_freq, kc, vc, ks,
                                               vs, f->d_pos, m->max_seq, c->nh, c->nkv, c->hd));
    else if (f->decode)
        FRT_TRY(frt_dense_decode_prep_norm(st, q, k, v, lw->q_norm, lw->k_norm, c->eps, c->inv_freq, kc, vc, f->d_pos,
                                           m->max_seq, c->nh, c->nkv, c->hd));
    else if (c->fp8)
        FRT_TRY(frt_dense_prefill_prep_packed_norm_fp8(st, c->t0, W, c->q, lw->q_norm, lw->k_norm, c->eps, c->inv_freq,
                                                       kc, vc, ks, vs, f->d_pos, f->d_n, R, m->max_seq, c->nh, c->nkv,
                                                       c->hd));
    else
        FRT_TRY(frt_dense_prefill_prep_packed_norm(st, c->t0, W, c->q, lw->q_norm, lw->k_norm, c->eps, c->inv_freq, kc,
                                                   vc, f->d_pos, f->d_n, R, m->max_seq, c->nh, c->nkv, c->hd));
    return attn_after_prep(f, l, f->decode ? q : c->q, ob);
}

/* The rows' q, k, v [R, qd | kvd] f32 (at q, k, v; with f->qkv_one one
 * GEMM's rows c->t0 [R, qd + 2 kvd], q roped into c->q) through the
 * biases, the q / k norms, RoPE at the boundary's positions and the KV
 * append of layer l (the bound slot's cache), then attention into ob [R,
 * qd] bf16 (the kernels round once, RNE: the bits of an f32 output
 * converted). */
static int attn_rows(const fwd *f, int l, float *q, float *k, float *v, uint16_t *ob)
{
    frt_model *m = f->m;
    cd_model *c = f->c;
    const cd_layer *lw = &c->layers[l];
    void *st = f->st;
    int R = f->R;
    uint16_t *kc = frt_buffer_ptr(dense_of(m)->kv_k[l]), *vc = frt_buffer_ptr(dense_of(m)->kv_v[l]);
    frt_dense_qkv_bias b;
    if (f->decode && decode_bias(lw, &b)) {
        /* the decode prep adds them */
    } else if (lw->q_bias && f->qkv_one) { /* the biases lie end to end too (qkv_fused) */
        FRT_TRY(frt_dense_bias_add(st, c->t0, lw->q_bias, f->d_n, R, c->qd + 2 * c->kvd));
    } else if (lw->q_bias) {
        FRT_TRY(frt_dense_bias_add(st, q, lw->q_bias, f->d_n, R, c->qd));
        FRT_TRY(frt_dense_bias_add(st, k, lw->k_bias, f->d_n, R, c->kvd));
        FRT_TRY(frt_dense_bias_add(st, v, lw->v_bias, f->d_n, R, c->kvd));
    }
    if (lw->q_norm && (f->qkv_one || (f->decode && norm_prep_ok(c))))
        return attn_norm_prep(f, l, q, k, v, ob); /* the norms in the prep (one launch for three) */
    if (lw->q_norm) {
        FRT_TRY(frt_cuda_rmsnorm(st, q, F32, q, F32, lw->q_norm, f->d_n, R, c->nh, c->hd, c->eps, 0));
        FRT_TRY(frt_cuda_rmsnorm(st, k, F32, k, F32, lw->k_norm, f->d_n, R, c->nkv, c->hd, c->eps, 0));
    }
    if (c->fp8) return attn_fp8(f, l, q, k, v, ob);
    if (f->decode) { /* decode: RoPE and the KV append in one launch (the same bits) */
        FRT_TRY(frt_dense_decode_prep(st, q, k, v, c->inv_freq, kc, vc, f->d_pos, m->max_seq, c->nh, c->nkv, c->hd,
                                      decode_bias(lw, &b)));
        return attn_after_prep(f, l, q, ob);
    }
    if (f->qkv_one) { /* the same, reading the one GEMM's rows in place (q into c->q, or c->q16) */
        FRT_TRY(frt_dense_prefill_prep_packed(st, c->t0, c->qd + 2 * c->kvd, c->q16 ? NULL : c->q, c->inv_freq, kc, vc,
                                              f->d_pos, f->d_n, R, m->max_seq, c->nh, c->nkv, c->hd, c->q16));
        return attn_after_prep(f, l, c->q16 ? NULL : c->q, ob);
    }
    FRT_TRY(frt_dense_prefill_prep(st, q, k, v, c->inv_freq, kc, vc, f->d_pos, f->d_n, R, m->max_seq, c->nh, c->nkv,
                                   c->hd, c->q16)); /* RoPE and the append, one launch (the bits of the three) */
    return attn_after_prep(f, l, c->q16 ? NULL : q, ob);
}

/* Decode rows r0 .. r0+g-1 of q, k, v = x . W^T in one GEMV launch (bf16
 * or E4M3 weights): x = c->h's rows, or with nm its RMSNorm prologue's
 * rows of the residual (the same bits as rmsnorm + the GEMVs). */
static int qkv_products(const fwd *f, int l, int r0, int g, const frt_cuda_gemv_norm *nm)
{
    cd_model *c = f->c;
    const cd_layer *lw = &c->layers[l];
    float *q = c->q + (size_t)r0 * c->qd, *k = c->k + (size_t)r0 * c->kvd, *v = c->v + (size_t)r0 * c->kvd;
    const uint16_t *x = c->h + (size_t)r0 * c->H;
    if (c->wfp8) {
        const cd_layer8 *l8 = &c->layers8[l];
        const frt_cuda_gemv_fp8_entry e[3] = {{q, F32, l8->q_proj.w, l8->q_proj.s, c->qd},
                                              {k, F32, l8->k_proj.w, l8->k_proj.s, c->kvd},
                                              {v, F32, l8->v_proj.w, l8->v_proj.s, c->kvd}};
        if (c->wblk)
            return nm ? frt_cuda_gemv_fp8_b128_multi_norm(f->st, e, 3, nm, g, c->H)
                      : frt_cuda_gemv_fp8_b128_multi(f->st, e, 3, x, g, c->H);
        return nm ? frt_cuda_gemv_fp8_multi_norm(f->st, e, 3, nm, g, c->H)
                  : frt_cuda_gemv_fp8_multi(f->st, e, 3, x, g, c->H);
    }
    const frt_cuda_gemv_entry e[3] = {{q, F32, lw->q_proj, c->qd}, {k, F32, lw->k_proj, c->kvd},
                                      {v, F32, lw->v_proj, c->kvd}};
    return nm ? frt_cuda_gemv_multi_norm(f->st, e, 3, nm, g, c->H) : frt_cuda_gemv_multi(f->st, e, 3, x, g, c->H);
}

/* Decode rows r0 .. r0+g-1 of the SwiGLU MLP's first half, gate, up and
 * silu(gate) * up in one GEMV launch into act [g, I] bf16 (bf16 or E4M3
 * weights; x as qkv_products). */
static int swiglu_products(const fwd *f, int l, uint16_t *act, int r0, int g, const frt_cuda_gemv_norm *nm)
{
    cd_model *c = f->c;
    const cd_layer *lw = &c->layers[l];
    const uint16_t *x = c->h + (size_t)r0 * c->H;
    if (c->wfp8) {
        const cd_layer8 *l8 = &c->layers8[l];
        const frt_cuda_gemv_fp8_mat gate = {l8->gate_proj.w, l8->gate_proj.s}, up = {l8->up_proj.w, l8->up_proj.s};
        if (c->wblk)
            return nm ? frt_cuda_gemv_fp8_b128_swiglu_norm(f->st, act, BF16, nm, &gate, &up, g, c->H, c->I)
                      : frt_cuda_gemv_fp8_b128_swiglu(f->st, act, BF16, x, &gate, &up, g, c->H, c->I);
        return nm ? frt_cuda_gemv_fp8_swiglu_norm(f->st, act, BF16, nm, &gate, &up, g, c->H, c->I)
                  : frt_cuda_gemv_fp8_swiglu(f->st, act, BF16, x, &gate, &up, g, c->H, c->I);
    }
    return nm ? frt_cuda_gemv_swiglu_norm(f->st, act, BF16, nm, lw->gate_proj, lw->up_proj, g, c->H, c->I)
              : frt_cuda_gemv_swiglu(f->st, act, BF16, x, lw->gate_proj, lw->up_proj, g, c->H, c->I);
}

/* The attention output o [R, qd]: bf16, o_proj (+ bias) into c->delta;
 * decode: added into c->x. */
static int attn_out(const fwd *f, int l)
{
    cd_model *c = f->c;
    const cd_layer *lw = &c->layers[l];
    FRT_TRY(gemm_out(f, c->ob, lw->o_proj, L8(c, l, o_proj), c->qd));
    if (lw->o_bias) FRT_TRY(frt_dense_bias_add(f->st, f->decode ? c->x : c->delta, lw->o_bias, f->d_n, f->R, c->H));
    return 0;
}

/* Attention of the normed input c->h; its o_proj output (+ bias) goes to
 * c->delta; decode: of rmsnorm(c->x, input_ln), added into c->x. */
static int attention_block(const fwd *f, int l)
{
    cd_model *c = f->c;
    const cd_layer *lw = &c->layers[l];
    if (f->decode) { /* the input norm, q, k and v in one GEMV launch */
        const frt_cuda_gemv_norm nm = resid_norm(f, lw->input_ln);
        FRT_TRY(qkv_products(f, l, 0, f->R, &nm));
    } else if (f->qkv_one) { /* one GEMM over the weights lying end to end: t0 [R, q | k | v] */
        FRT_TRY(gemm(f, c->t0, F32, c->h, lw->q_proj, c->H, c->qd + 2 * c->kvd));
    } else {
        FRT_TRY(h_fp8(f, l > 0)); /* FP8 prefill: h quantized once for q, k, v */
        FRT_TRY(lin(f, c->q, c->h, lw->q_proj, L8(c, l, q_proj), c->H, c->qd));
        FRT_TRY(lin(f, c->k, c->h, lw->k_proj, L8(c, l, k_proj), c->H, c->kvd));
        FRT_TRY(lin(f, c->v, c->h, lw->v_proj, L8(c, l, v_proj), c->H, c->kvd));
    }
    FRT_TRY(attn_rows(f, l, c->q, c->k, c->v, c->ob));
    return attn_out(f, l);
}

/* SwiGLU MLP of c->h into c->delta; decode: of rmsnorm(c->x, post_ln), added
 * into c->x. */
static int mlp_block(const fwd *f, int l)
{
    cd_model *c = f->c;
    const cd_layer *lw = &c->layers[l];
    if (f->decode) { /* post_ln, gate, up and SwiGLU in one GEMV launch */
        const frt_cuda_gemv_norm nm = resid_norm(f, lw->post_ln);
        FRT_TRY(swiglu_products(f, l, c->ob, 0, f->R, &nm));
    } else if (c->mlp_acc) { /* FP8: unscaled accumulators, the scales applied by their consumers */
        const cd_layer8 *w8 = &c->layers8[l];
        FRT_TRY(h_fp8(f, 1));
        FRT_TRY(frt_cuda_gemm_fp8_mlp(c->gemm8, f->st, c->xq, c->xs, (uint16_t *)c->t0, (uint16_t *)c->t1, c->delta,
                                      w8->gate_proj.w, w8->gate_proj.s, w8->up_proj.w, w8->up_proj.s,
                                      w8->down_proj.w, f->R, c->H, c->I));
        return 0; /* delta: down's accumulator, scaled by the prefill_norm after it (mlp_acc_scales) */
    } else if (!c->wfp8 && frt_cuda_gemm_swiglu_ok(c->gemm, f->R, c->H, c->I, BF16)) { /* an append bucket: one launch */
        FRT_TRY(frt_cuda_gemm_swiglu(c->gemm, f->st, c->ob, c->h, lw->gate_proj, lw->up_proj, f->R, c->H, c->I, BF16));
    } else {
        FRT_TRY(h_fp8(f, 1)); /* FP8 prefill: h quantized once for gate and up */
        const frt_cuda_dtype gt = gate_dt(c);
        FRT_TRY(lin_as(f, c->t0, gt, c->h, lw->gate_proj, L8(c, l, gate_proj), c->H, c->I));
        FRT_TRY(lin_as(f, c->t1, gt, c->h, lw->up_proj, L8(c, l, up_proj), c->H, c->I));
        FRT_TRY(frt_cuda_swiglu(f->st, c->ob, BF16, c->t0, c->t1, gt, f->d_n, f->R, c->I));
    }
    return gemm_out(f, c->ob, lw->down_proj, L8(c, l, down_proj), c->I);
}

/* The weight scales of layer l's down_proj when its prefill mlp_block
 * leaves the FP8 accumulator in c->delta (mlp_acc), else NULL. */
static const float *mlp_acc_scales(const cd_model *c, int l) { return c->mlp_acc ? c->layers8[l].down_proj.s : NULL; }

/* Prefill: the residual c->x (after adding c->delta, unless the products
 * added into it) normed with w into out; acc_sw: delta is an FP8
 * accumulator of these weight scales (and c->xs's token scales). With
 * fp8_acts, out h is quantized in the same launch into c->xq / c->xs (c->xs
 * in place: row t's token scale is read before its new one is written),
 * and h itself is not stored: the FP8 products read only the codes. */
static int prefill_norm(const fwd *f, void *out, frt_cuda_dtype out_dt, const float *w, const float *acc_sw)
{
    cd_model *c = f->c;
    if (c->resid_gemm) return frt_cuda_rmsnorm(f->st, out, out_dt, c->x, F32, w, f->d_n, f->R, 1, c->H, c->eps, 0);
    if (fp8_acts(c) && out == c->h)
        return frt_cuda_add_rmsnorm_quant(f->st, c->x, c->delta, F32, acc_sw ? c->xs : NULL, acc_sw, NULL, c->xq,
                                          c->xs, w, f->d_n, f->R, c->H, c->eps, 0);
    if (acc_sw)
        return frt_cuda_add_rmsnorm_fp8acc(f->st, c->x, c->delta, c->xs, acc_sw, out, out_dt, w, f->d_n, f->R, c->H,
                                           c->eps, 0);
    return frt_cuda_add_rmsnorm(f->st, c->x, c->delta, F32, out, out_dt, w, f->d_n, f->R, c->H, c->eps, 0);
}

/* One forward step: journal, embedding, the layers, final norm, the logits
 * of the last valid row, the boundary advance. */
static int record_forward(const fwd *f)
{
    frt_model *m = f->m;
    cd_model *c = f->c;
    void *st = f->st;
    int R = f->R, H = c->H;
    const int32_t *ids = f->decode ? f->d_pending : (const int32_t *)frt_buffer_ptr(m->in_ids);

    if (f->pieces > 1)
        FRT_TRY(frt_group_pos(st, c->gpos, f->d_pos, f->pieces, m->C, c->attn_pieces));
    FRT_TRY(frt_qwen35_journal(st, frt_buffer_ptr(m->tokens), ids, f->d_pos, f->d_n, R, m->max_seq,
                               frt_buffer_ptr(m->seen), f->decode ? frt_buffer_ptr(m->counts) : NULL));
    FRT_TRY(frt_cuda_embedding(st, c->x, F32, c->embed, c->V, H, ids, f->d_n, R));
    FRT_TRY(debug_copy(f, 0, c->x));
    if (!f->decode)
        FRT_TRY(frt_cuda_rmsnorm(st, c->h, BF16, c->x, F32, c->layers[0].input_ln, f->d_n, R, 1, H, c->eps, 0));
    for (int l = 0; l < c->L; l++) {
        const cd_layer *lw = &c->layers[l];
        if (!f->decode) FRT_TRY(frt_model_layer_wait(f->s, m, l, R)); /* the pipelined restore's layer l */
        FRT_TRY(attention_block(f, l));
        if (!f->decode) FRT_TRY(prefill_norm(f, c->h, BF16, lw->post_ln, NULL));
        FRT_TRY(mlp_block(f, l)); /* decode: down_proj added into c->x */
        if (!f->decode && l + 1 < c->L)
            FRT_TRY(prefill_norm(f, c->h, BF16, c->layers[l + 1].input_ln, mlp_acc_scales(c, l)));
        else if (!f->decode) /* the last residual add (if any) with the final norm */
            FRT_TRY(prefill_norm(f, c->hf, F32, c->final_norm, mlp_acc_scales(c, l)));
        FRT_TRY(debug_copy(f, l + 1, c->x));
    }
    if (f->decode) /* the final norm of the residual: the LM head's input */
        FRT_TRY(frt_cuda_rmsnorm(st, c->hf, F32, c->x, F32, c->final_norm, f->d_n, R, 1, H, c->eps, 0));
    FRT_TRY(debug_copy(f, c->L + 1, c->hf));
    FRT_TRY(frt_cuda_last_row(st, c->last, BF16, c->hf, F32, f->d_n, R, H));
    float *logits = frt_buffer_ptr(m->logits);
    /* the logits (a prefill's: on the call's last piece only, f->d_no_logits) */
    FRT_TRY(frt_lm_head_cuda_run(&c->head, c->gemm, st, f->d_no_logits, logits, c->last, 1, H, c->V));
    return frt_qwen35_advance(st, f->d_pos, f->d_pending, f->d_has_logits, c->debug ? c->debug_rows : NULL, f->d_n,
                              f->d_no_logits, R);
}

/* The sampling step of frt/sampling.h (frt_cuda_sample_step). */
static int record_sample_work(const fwd *f)
{
    frt_model *m = f->m;
    cd_model *c = f->c;
    return frt_cuda_sample_step(f->st, f->d_pending, frt_buffer_ptr(m->logits), c->V, f->d_params,
                                frt_buffer_ptr(m->counts), frt_buffer_ptr(m->seen), f->d_mask_on,
                                frt_buffer_ptr(m->in_mask), f->d_rng, frt_buffer_ptr(m->out_logprobs), c->sample_ws,
                                c->sample_ws_bytes);
}

static int cd_record_prefill(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    FRT_TRY(frt_group_bucket_check(rc->m, rc->bucket, "dense cuda"));
    fwd f = fwd_make(s, rc->m, rc->bucket, 0);
    return record_forward(&f);
}

static int cd_record_decode(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    fwd f = fwd_make(s, rc->m, 1, 1);
    FRT_TRY(record_forward(&f));
    return record_sample_work(&f);
}

/* ---- the batched decode of branch slots (frt/branch.h) --------------------
 *
 * One graph decodes slots 0..n-1 together: the weight-bound products run on
 * all n rows at once (the weights are read once per group of batch_g <=
 * FRT_CUDA_GEMV_MAX_N rows), the rest per slot on its own state (the
 * journal, the embedding of its pending token, RoPE, the KV append and
 * attention over its own cache, its logits, the advance and its sampler).
 * The journal / embedding at the start and the logits row / advance /
 * sampler at the end run on one side stream a slot (batch_cuda.h). After a
 * fork the attention streams the trunk's KV rows once, from slot 0, for
 * every slot (cd_shared_rows, frt_cuda_attention_batch's d_shared: the rows
 * are the same bytes in every slot, each slot keeps its own copy so it
 * stays a whole state). Every product takes the GEMV, whose arithmetic for a row does not depend
 * on the rows beside it (gemv.cu: the split of a row over warps is chosen
 * as for n = 1), and every other kernel is row-wise: a branch gets the same
 * bits batched as decoded alone (tests/test_fork.c, fork_cuda). */

/* The batched decode's products take their norms from one rmsnorm launch
 * over all n rows into c->h (bf16) and the plain GEMVs: the _norm GEMVs'
 * prologue (the same bits as frt_cuda_rmsnorm's bf16 output) normalises
 * every row in every block, ~30 us a launch at 4 rows (tests/
 * test_cuda_gemv_norm.c) where one rmsnorm launch costs ~3. */

/* Rows r0 .. r0+g-1: o_proj of the bf16 attention output added into the
 * residual c->x (+ bias). */
static int out_rows(const fwd *f, int l, int r0, int g)
{
    cd_model *c = f->c;
    const cd_layer *lw = &c->layers[l];
    float *x = c->x + (size_t)r0 * c->H;
    FRT_TRY(resid_add(f, x, c->ob + (size_t)r0 * c->qd, lw->o_proj, L8(c, l, o_proj), g, c->qd));
    return lw->o_bias ? frt_dense_bias_add(f->st, x, lw->o_bias, NULL, g, c->H) : 0;
}

/* Rows r0 .. r0+g-1 of the MLP of c->h = rmsnorm(x, post_ln), added into
 * the residual c->x. */
static int mlp_rows(const fwd *f, int l, int r0, int g)
{
    cd_model *c = f->c;
    uint16_t *act = c->ob + (size_t)r0 * c->I; /* ob [C, wide] bf16: the attention output is consumed */
    FRT_TRY(swiglu_products(f, l, act, r0, g, NULL));
    return resid_add(f, c->x + (size_t)r0 * c->H, act, c->layers[l].down_proj, L8(c, l, down_proj), g, c->I);
}

/* rmsnorm(c->x, w) of the n rows into c->h (bf16): the GEMVs' input. */
static int norm_rows(const fwd *f, const float *w)
{
    cd_model *c = f->c;
    return frt_cuda_rmsnorm(f->st, c->h, BF16, c->x, F32, w, NULL, f->R, 1, c->H, c->eps, 0);
}

/* The FP8 KV cache in the batched decode, after the biases and norms: RoPE
 * of every slot's q and k rows at its position and the append into its
 * caches in one launch (frt_dense_decode_prep_batch_fp8, the bits of
 * attn_fp8's prep per slot), then one flash-decoding launch over every slot
 * into c->ob (bf16; frt_cuda_attention_batch_fp8, the bits of attn_fp8 per
 * slot, the fork's shared rows read once). */
static int attn_batch_fp8(const fwd *f, int l)
{
    frt_model *m = f->m;
    cd_model *c = f->c;
    int n = f->R, B = c->batch_slots;
    /* the tables hold the slots' cache pointers, here E4M3 caches */
    uint8_t *const *tk = (uint8_t *const *)(c->tab_k + (size_t)l * B);
    uint8_t *const *tv = (uint8_t *const *)(c->tab_v + (size_t)l * B);
    const float *ks = kv_scale_of(c, l, 0), *vs = kv_scale_of(c, l, 1);
    const int32_t *const *tp = (const int32_t *const *)c->tab_pos;
    const cd_layer *lw = &c->layers[l];
    frt_dense_qkv_bias b;
    if (lw->q_norm) /* the norms in the prep, as attn_rows' slot alone (norm_prep_ok: attn_batch's head_dims) */
        FRT_TRY(frt_dense_decode_prep_norm_batch_fp8(f->st, c->q, c->k, c->v, lw->q_norm, lw->k_norm, c->eps,
                                                     c->inv_freq, tk, tv, ks, vs, tp, n, m->max_seq, c->nh, c->nkv,
                                                     c->hd));
    else
        FRT_TRY(frt_dense_decode_prep_batch_fp8(f->st, c->q, c->k, c->v, c->inv_freq, tk, tv, ks, vs, tp, n,
                                                m->max_seq, c->nh, c->nkv, c->hd, decode_bias(lw, &b)));
    return frt_cuda_attention_batch_fp8(f->st, c->ob, BF16, c->q, (const uint8_t *const *)tk,
                                        (const uint8_t *const *)tv, ks, vs, tp, c->tab_shared, n, m->max_seq, c->nh,
                                        c->nkv, c->hd, c->scale, DECODE_SPLIT, c->attn_ws, c->attn_ws_bytes);
}

/* Attention of the n = f->R rows, row b on slot b, into c->ob (bf16,
 * as attn_rows): biases over all rows (row-wise kernels; or in the prep),
 * the q / k norms, RoPE + the KV append in one launch for every slot and
 * flash-decoding in one (device tables; attn_batch_fp8 with the
 * FP8 KV cache), the same bits per row
 * as attn_rows on its slot alone. A head_dim the batched flash-decoding
 * does not take (64, 128, 256 only) runs attn_rows slot by slot (fb). */
static int attn_batch(const fwd *f, const fwd *fb, int l)
{
    frt_model *m = f->m;
    cd_model *c = f->c;
    const cd_layer *lw = &c->layers[l];
    void *st = f->st;
    int n = f->R, B = c->batch_slots;
    if (c->hd != 64 && c->hd != 128 && c->hd != 256) {
        for (int b = 0; b < n; b++) {
            FRT_TRY(frt_model_bind_slot(m, b));
            FRT_TRY(attn_rows(&fb[b], l, c->q + (size_t)b * c->qd, c->k + (size_t)b * c->kvd,
                              c->v + (size_t)b * c->kvd, c->ob + (size_t)b * c->qd));
        }
        return 0;
    }
    frt_dense_qkv_bias b;
    if (lw->q_bias && !decode_bias(lw, &b)) { /* else the prep adds them */
        FRT_TRY(frt_dense_bias_add(st, c->q, lw->q_bias, NULL, n, c->qd));
        FRT_TRY(frt_dense_bias_add(st, c->k, lw->k_bias, NULL, n, c->kvd));
        FRT_TRY(frt_dense_bias_add(st, c->v, lw->v_bias, NULL, n, c->kvd));
    }
    if (c->fp8) return attn_batch_fp8(f, l);
    uint16_t *const *tk = c->tab_k + (size_t)l * B, *const *tv = c->tab_v + (size_t)l * B;
    const int32_t *const *tp = (const int32_t *const *)c->tab_pos;
    if (lw->q_norm) /* the norms in the prep, as attn_rows' slot alone */
        FRT_TRY(frt_dense_decode_prep_norm_batch(st, c->q, c->k, c->v, lw->q_norm, lw->k_norm, c->eps, c->inv_freq,
                                                 tk, tv, tp, n, m->max_seq, c->nh, c->nkv, c->hd));
    else
        FRT_TRY(frt_dense_decode_prep_batch(st, c->q, c->k, c->v, c->inv_freq, tk, tv, tp, n, m->max_seq, c->nh,
                                            c->nkv, c->hd, decode_bias(lw, &b)));
    return frt_cuda_attention_batch(st, c->ob, BF16, c->q, (const uint16_t *const *)tk, (const uint16_t *const *)tv,
                                    tp, c->tab_shared, n, m->max_seq, c->nh, c->nkv, c->hd, c->scale, DECODE_SPLIT,
                                    c->attn_ws, c->attn_ws_bytes);
}

/* Fills the device tables of the batched decode once the branch slots
 * exist (frt_arch_backend.slots_ready): each slot's caches and position. */
static int cd_slots_ready(frt_model *m)
{
    cd_model *c = m->bk_data;
    int B = c->batch_slots;
    if (B < 2) return 0;
    if (B > m->n_slots) B = c->batch_slots = m->n_slots;
    size_t per = (size_t)c->L * (size_t)B;
    void **hk = malloc(per * sizeof *hk), **hv = malloc(per * sizeof *hv), **hp = malloc((size_t)B * sizeof *hp);
    int bound = m->bound_slot, rc = (hk && hv && hp) ? 0 : frt_error(FRT_ERR_OUT_OF_MEMORY, "dense cuda: tables");
    for (int b = 0; b < B && rc == 0; b++) {
        rc = frt_model_bind_slot(m, b);
        for (int l = 0; l < c->L && rc == 0; l++) {
            hk[(size_t)l * B + b] = frt_buffer_ptr(dense_of(m)->kv_k[l]);
            hv[(size_t)l * B + b] = frt_buffer_ptr(dense_of(m)->kv_v[l]);
        }
        if (rc == 0) hp[b] = (char *)frt_buffer_ptr(m->boundary) + offsetof(frt_boundary, pos);
    }
    int brc = frt_model_bind_slot(m, bound);
    if (rc == 0) rc = brc;
    if (rc == 0 && (cudaMemcpy(c->tab_k, hk, per * sizeof *hk, cudaMemcpyHostToDevice) != cudaSuccess ||
                    cudaMemcpy(c->tab_v, hv, per * sizeof *hv, cudaMemcpyHostToDevice) != cudaSuccess ||
                    cudaMemcpy(c->tab_pos, hp, (size_t)B * sizeof *hp, cudaMemcpyHostToDevice) != cudaSuccess))
        rc = frt_error(FRT_ERR_BACKEND, "dense cuda: the batched decode's tables: %s",
                       cudaGetErrorString(cudaGetLastError()));
    free(hk), free(hv), free(hp);
    return rc;
}

/* frt_arch_backend.shared_rows: slots 1..n-1 read their KV rows below
 * `rows` from slot 0 (0 everywhere when n < 2). */
static int cd_shared_rows(frt_model *m, int n, int rows)
{
    cd_model *c = m->bk_data;
    if (!c || c->batch_slots < 2) return 0;
    int32_t v[BATCH_MAX];
    for (int b = 0; b < c->batch_slots; b++) v[b] = b >= 1 && b < n ? rows : 0;
    if (cudaMemcpy(c->tab_shared, v, (size_t)c->batch_slots * sizeof v[0], cudaMemcpyHostToDevice) != cudaSuccess)
        return frt_error(FRT_ERR_BACKEND, "dense cuda: the fork's shared rows: %s",
                         cudaGetErrorString(cudaGetLastError()));
    return 0;
}

static int record_batch(frt_stream *s, frt_model *m, int n, fwd *fb)
{
    cd_model *c = m->bk_data;
    const int G = c->batch_g;
    fwd fa = fwd_make(s, m, n, 1); /* the rows of every slot (its boundary pointers are unused) */
    for (int b = 0; b < n; b++) {
        FRT_TRY(frt_model_bind_slot(m, b));
        fb[b] = fwd_make(s, m, 1, 1);
    }
    FRT_TRY(frt_batch_ends_start(&c->ends, m, fa.st, n, c->x, c->embed, c->H));
    for (int l = 0; l < c->L; l++) {
        const cd_layer *lw = &c->layers[l];
        FRT_TRY(norm_rows(&fa, lw->input_ln));
        for (int r0 = 0; r0 < n; r0 += G) FRT_TRY(qkv_products(&fa, l, r0, n - r0 < G ? n - r0 : G, NULL));
        FRT_TRY(attn_batch(&fa, fb, l));
        for (int r0 = 0; r0 < n; r0 += G) FRT_TRY(out_rows(&fa, l, r0, n - r0 < G ? n - r0 : G));
        FRT_TRY(norm_rows(&fa, lw->post_ln));
        for (int r0 = 0; r0 < n; r0 += G) FRT_TRY(mlp_rows(&fa, l, r0, n - r0 < G ? n - r0 : G));
    }
    FRT_TRY(frt_cuda_rmsnorm(fa.st, c->hf, F32, c->x, F32, c->final_norm, NULL, n, 1, c->H, c->eps, 0));
    FRT_TRY(frt_cuda_convert(fa.st, c->h, BF16, c->hf, F32, NULL, n, c->H));
    for (int r0 = 0; r0 < n; r0 += G) {
        int g = n - r0 < G ? n - r0 : G;
        FRT_TRY(frt_lm_head_cuda_run(&c->head, c->gemm, fa.st, NULL, c->blogits + (size_t)r0 * c->V,
                                     c->h + (size_t)r0 * c->H, g, c->H, c->V));
    }
    return frt_batch_ends_finish(&c->ends, m, fa.st, n);
}

static int cd_record_decode_batch(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    frt_model *m = rc->m;
    cd_model *c = m->bk_data;
    int n = rc->bucket;
    if (!c->batch_slots)
        return frt_error(FRT_ERR_UNSUPPORTED,
                         "dense cuda: no batched decode (a product of the batch is not a GEMV for 2 rows)");
    if (n < 2 || n > c->batch_slots)
        return frt_error(FRT_ERR_INVALID_ARGUMENT, "dense cuda: batch of %d slots outside [2, %d]", n, c->batch_slots);
    fwd *fb = malloc((size_t)n * sizeof *fb);
    if (!fb) return frt_error(FRT_ERR_OUT_OF_MEMORY, "dense cuda: out of memory");
    int err = record_batch(s, m, n, fb);
    free(fb);
    return err;
}

static int cd_record_sample(frt_stream *s, void *user)
{
    const frt_record_ctx *rc = user;
    fwd f = fwd_make(s, rc->m, 1, 0);
    return record_sample_work(&f);
}

static int cd_debug_hidden(frt_model *m, int idx, float *out, int n)
{
    cd_model *c = m->bk_data;
    if (!c || !c->debug) return frt_error(FRT_ERR_STATE, "debug_hidden: not enabled (params.debug_hidden)");
    int32_t rows = 0;
    FRT_TRY(frt_buffer_read(c->sbuf, c->debug_rows_off, &rows, sizeof rows, m->stream));
    FRT_TRY(frt_stream_sync(m->stream));
    if (idx < 0 || idx > c->L + 1 || n < 1 || n > rows)
        return frt_error(FRT_ERR_OUT_OF_RANGE, "debug_hidden: index %d rows %d out of range (%d rows recorded)", idx,
                         n, rows);
    size_t H = (size_t)c->H;
    FRT_TRY(frt_buffer_read(c->sbuf, c->debug_off + (size_t)idx * (size_t)m->C * H * sizeof(float), out,
                            (size_t)n * H * sizeof(float), m->stream));
    return frt_stream_sync(m->stream);
}

const frt_arch_backend frt_dense_cuda_backend = {
    .name = "cuda",
    .kv_dtype = FRT_DT_BF16,
    .state_dtypes = "weights=bf16,norms=f32,kv=bf16,resid=f32,gemm=cublaslt-bf16-f32acc,decode=fused-gemv-1,"
                    "prefill_attn=wgmma-hd128-2,attn_split=half-1,prefill_resid=epilogue-1",
    .weights_fp8 = 1, /* FP8 Linear weights: E4M3 GEMV (decode), cuBLASLt FP8 GEMM (prefill); m->weights_desc */
    .lm_head_fp8 = 1, /* c->head: the E4M3 GEMV (lm_head_cuda.c) */
    .state_dtypes_kv_fp8 = "weights=bf16,norms=f32,kv=f8_e4m3-satfinite,kv_scale=per-head-static,resid=f32,"
                           "gemm=cublaslt-bf16-f32acc,decode=fused-gemv-1,attn_fp8=tc-widen-bf16-1,attn_split=half-1",
    .load_weights = cd_load_weights,
    .alloc_scratch = cd_alloc_scratch,
    .free = cd_free,
    .record_prefill = cd_record_prefill,
    .prefill_group = cd_prefill_group,
    .record_decode = cd_record_decode,
    .record_sample = cd_record_sample,
    .record_decode_batch = cd_record_decode_batch,
    .shared_rows = cd_shared_rows,
    .slots_ready = cd_slots_ready,
    .debug_hidden = cd_debug_hidden,
    .fingerprint_extra = cd_fingerprint_extra,
    .gemm_autotune = 1, /* the append plans, below C (frt_gemm_tune_appends) */
    .layer_waits = 1,
    .kv_source = cd_kv_source,
};
